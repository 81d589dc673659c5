#!/usr/bin/env bash
# SGLang 0.5.23 on one GPU, the rows not yet run there: the overlay with its default features vs stock
# (benchmarks/timing_overhead.py on llama3-8b, simulated accept length 3.3, bs 1 and 16, 5 paired repeats,
# bootstrap interval), `sglang-patches profile` of the ON server, then the opt-in step_timing feature as
# verify_cost.py's plain-step baseline (llama3-8b, 4 draft tokens, bs 1 and 16) if the deadline allows.
# Carry [".gpu-0523"]; from the repo root: bash benchmarks/gpu_plans/sglang_0523_overhead.sh [DEADLINE_S]
# The same pair on 0.5.17 (carry [".gpu"]) with longer repeats: BUNDLE=.gpu REQUESTS_PER_RUN=4 bash ... 580
set -u
DEADLINE=${1:-580}
BUNDLE=${BUNDLE:-.gpu-0523}
REQUESTS_PER_RUN=${REQUESTS_PER_RUN:-1}
SECONDS=0
source "$BUNDLE/env.sh" || { echo "env.sh failed"; exit 1; }
export SGLANG_PATCHES_CACHE=/tmp/spcache
mkdir -p "$OUT"
python -m pip install -q --no-deps --no-build-isolation --no-index -e . > "$OUT/pip.txt" 2>&1 || tail -5 "$OUT/pip.txt"
timeout $((DEADLINE - 20 - SECONDS)) python benchmarks/timing_overhead.py --fixture llama3-8b --out "$OUT/oh" \
  --batch-sizes 1,16 --repeats 5 --requests-per-run "$REQUESTS_PER_RUN" --crosscheck-seconds 0 --profile-seconds 8 2>&1 | tail -n 25
echo "overhead done at ${SECONDS}s"
LEFT=$((DEADLINE - 30 - SECONDS))
if [ "$LEFT" -gt 200 ]; then
  python benchmarks/verify_cost.py --out "$OUT/vc" --fixtures llama3-8b --draft-tokens 4 --batch-sizes 1,16 \
    --parallel 1 --deadline "$LEFT" --round-estimate 110 2>&1 | tail -n 15
fi
for f in "$OUT"/oh/*.log "$OUT"/vc/logs/*.log; do [ -f "$f" ] && { echo "== $f"; grep -nE 'Error|Traceback' "$f" | tail -n 4 | cut -c1-300; }; done
# Profiler traces are too big to come back: pack the files under 2 MB.
( cd "$OUT" && find oh vc -type f -size -2M 2>/dev/null > keep.txt; tar czf r.tgz -T keep.txt; rm -rf oh vc keep.txt )
echo "all done at ${SECONDS}s"
