#!/usr/bin/env bash
# SGLang 0.5.23 on one GPU: the bundle's smoke (SGLang alone), then the overlay's parts
# (benchmarks/serve_checks.py on llama3-8b: timing = the README's main job). Carry [".gpu-0523"]; from the repo root on the GPU machine:
#   bash benchmarks/gpu_plans/sglang_0523.sh [PARTS]     (default timing,flagbug,plugin; results in $OUT)
# A warm machine skips the smoke once it passed there (/tmp/sglang-smoke/engine.log says ENGINE OK).
set -u
PARTS=${1:-timing,flagbug,plugin}
SECONDS=0
source .gpu-0523/env.sh || { echo "env.sh failed"; exit 1; }
export SGLANG_PATCHES_CACHE=/tmp/spcache
mkdir -p "$OUT"
if ! grep -q '^ENGINE OK' /tmp/sglang-smoke/engine.log 2>/dev/null; then
  SMOKE_BUDGET=${SMOKE_BUDGET:-330} SMOKE_ENGINE_TIMEOUT=${SMOKE_ENGINE_TIMEOUT:-300} bash .gpu-0523/smoke.sh \
    > "$OUT/smoke.txt" 2>&1
  tail -n 25 "$OUT/smoke.txt"
  grep -q '^ENGINE OK' /tmp/sglang-smoke/engine.log || { echo "SMOKE FAILED after ${SECONDS}s"; exit 1; }
fi
echo "smoke ok at ${SECONDS}s"
python -m pip install -q --no-deps --no-build-isolation --no-index -e . > "$OUT/pip.txt" 2>&1 || tail -5 "$OUT/pip.txt"
python benchmarks/serve_checks.py --out "$OUT/r" --fixture llama3-8b --parts "$PARTS" --deadline $((580 - SECONDS))
for f in "$OUT"/r/*/server.log; do [ -f "$f" ] && { echo "== $f"; grep -nE 'Error|Traceback|MISMATCH|COLLAPSE' "$f" | tail -n 6 | cut -c1-300; }; done
# The machine returns a limited number of files per call: pack the parts' folders into one archive.
( cd "$OUT" && tar czf r.tgz r && rm -rf r )
