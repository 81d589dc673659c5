#!/usr/bin/env bash
# SGLang 0.5.23 on one GPU, the adaptive rows not yet run there: serve_checks.py's `adaptive` part on llama3-8b
# (SGLang's built-in table started at steps 3, below its largest candidate 7, which 0.5.17 cannot serve; then
# the config `advise --adaptive-config` writes from that log, served with the start advise printed), then
# the step_timing feature at batch 16 (verify_cost.py's plain-step baseline) if the deadline allows.
# Carry [".gpu-0523"]; from the repo root: bash benchmarks/gpu_plans/sglang_0523_adaptive.sh [DEADLINE_S]
# STEP_TIMING=0 leaves the batch-16 step out and gives the adaptive part the whole deadline.
set -u
DEADLINE=${1:-580}
RESERVE=250; [ "${STEP_TIMING:-1}" = 0 ] && RESERVE=20
SECONDS=0
source .gpu-0523/env.sh >/dev/null || { echo "env.sh failed"; exit 1; }
export SGLANG_PATCHES_CACHE=/tmp/spcache
mkdir -p "$OUT"
python -m pip install -q --no-deps --no-build-isolation --no-index -e . > "$OUT/pip.txt" 2>&1 || tail -5 "$OUT/pip.txt"
python benchmarks/serve_checks.py --out "$OUT/r" --fixture llama3-8b --parts adaptive --deadline $((DEADLINE - RESERVE - SECONDS)) \
  2>&1 | tail -n 4 | cut -c1-400
echo "adaptive done at ${SECONDS}s"
LEFT=$((DEADLINE - 20 - SECONDS))
if [ "$RESERVE" -gt 20 ] && [ "$LEFT" -gt 150 ]; then
  python benchmarks/verify_cost.py --out "$OUT/vc16" --fixtures llama3-8b --draft-tokens 4 --batch-sizes 16 \
    --parallel 1 --deadline "$LEFT" --round-estimate 100 2>&1 | tail -n 8
fi
for f in "$OUT"/r/adaptive/*/server.log "$OUT"/vc16/logs/*.log; do
  [ -f "$f" ] && { echo "== $f"; grep -nE 'Error|Traceback|Switch adaptive' "$f" | tail -n 4 | cut -c1-300; }
done
( cd "$OUT" && find r vc16 -type f -size -2M 2>/dev/null > keep.txt; tar czf r.tgz -T keep.txt; rm -rf r vc16 keep.txt )
python - <<'PY'
import json, os, tarfile
t = tarfile.open(os.path.join(os.environ["OUT"], "r.tgz"))
m = next((m for m in t.getmembers() if m.name.endswith("r/adaptive.json")), None)
a = json.load(t.extractfile(m)) if m else {}
print("| started below largest | advised served | records = spec_verify_ct | steps match |")
print(f"| {a.get('started_below_largest')} | {a.get('advised_served')} | {a.get('records_equal_spec_verify_ct')} "
      f"| {a.get('records_steps_match_fraction')} |")
PY
echo "all done at ${SECONDS}s"
