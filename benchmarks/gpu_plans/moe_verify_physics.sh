#!/usr/bin/env bash
# MoE verify physics on the Kimi-K2 family fixture: verify GPU ms over a plain decode step for T draft tokens
# at bs 1, 4, 16, with SGLang's uniform expert routing (each token to its own random experts; the fixture's
# dummy router can send every token to the same ones). One GPU, carry .gpu; from the repo root:
#   bash benchmarks/gpu_plans/moe_verify_physics.sh [DRAFT_TOKENS] [DEADLINE_S]   (default 4,8,2 and 540)
# About 120 s per server round on an H100 (baseline, then one round per T). Results: $OUT/vc.tgz, a table last.
set -u
T=${1:-4,8,2}
DEADLINE=${2:-540}
source .gpu/env.sh || { echo "env.sh failed"; exit 1; }
export SGLANG_PATCHES_CACHE=/tmp/spcache
python -m pip install -q --no-deps --no-build-isolation --no-index -e . > "$OUT/pip.txt" 2>&1 || tail -5 "$OUT/pip.txt"
python benchmarks/verify_cost.py --out "$OUT/vc" --fixtures kimi-k2-mla --routing uniform --draft-tokens "$T" \
  --batch-sizes 1,4,16 --parallel 1 --deadline "$DEADLINE" --round-estimate 120 \
  --extra "--mem-fraction-static 0.6 --disable-custom-all-reduce" 2>&1 | tail -n 30
for f in "$OUT"/vc/logs/*.log; do [ -f "$f" ] && { echo "== $f"; grep -nE 'Error|Traceback' "$f" | tail -n 4 | cut -c1-300; }; done
( cd "$OUT" && tar czf vc.tgz vc && rm -rf vc )
