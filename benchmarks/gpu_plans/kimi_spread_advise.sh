#!/usr/bin/env bash
# The Kimi-K2 family fixture (kimi-k2-mla, SGLang 0.5.17), the two rows not yet run: distinct experts per MoE
# layer per pass at T = 1, 4, 8 under SGLang's uniform routing (benchmarks/moe_expert_spread.py), then
# `advise` on a bs-16 log, verify held flat and priced by the measured verify cost (serve_checks.py --parts advise).
# Carry [".gpu"]; from the repo root: bash benchmarks/gpu_plans/kimi_spread_advise.sh [DEADLINE_S]
set -u
DEADLINE=${1:-585}
PARTS=${2:-spread,advise}
SECONDS=0
source .gpu/env.sh || { echo "env.sh failed"; exit 1; }
export SGLANG_PATCHES_CACHE=/tmp/spcache
mkdir -p "$OUT"
python -m pip install -q --no-deps --no-build-isolation --no-index -e . > "$OUT/pip.txt" 2>&1 || tail -5 "$OUT/pip.txt"
[[ $PARTS == *spread* ]] && python benchmarks/moe_expert_spread.py --out "$OUT/spread" --fixture kimi-k2-mla --draft-tokens 1,4,8 \
  --routing uniform --deadline $((DEADLINE - 20)) --extra "--mem-fraction-static 0.6 --disable-custom-all-reduce" 2>&1 | tail -n 12
echo "spread done at ${SECONDS}s"
[[ $PARTS == *advise* ]] && timeout $((DEADLINE - 10 - SECONDS)) python benchmarks/serve_checks.py --out "$OUT/adv" --fixture kimi-k2-mla --parts advise \
  --verify-cost benchmarks/results/2026-12-06-kimi-family/llama_head/verify_cost.json:kimi-k2-mla \
  --deadline $((DEADLINE - 10 - SECONDS)) \
  --extra "--mem-fraction-static 0.6 --num-continuous-decode-steps 4 --disable-custom-all-reduce" 2>&1 | tail -n 25
for f in "$OUT"/spread/*.log "$OUT"/adv/*/server.log; do [ -f "$f" ] && { echo "== $f"; grep -nE 'Error|Traceback' "$f" | tail -n 4 | cut -c1-300; }; done
( cd "$OUT" && tar czf r.tgz --exclude="dumps-*" --exclude="*.pt" --exclude="*trace*" spread adv 2>/dev/null; cp spread/summary.json spread_summary.json 2>/dev/null; cp adv/advise.json advise.json 2>/dev/null; rm -rf spread adv )
echo "all done at ${SECONDS}s"
