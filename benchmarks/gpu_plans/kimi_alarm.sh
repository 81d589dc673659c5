#!/usr/bin/env bash
# The accept-collapse alarm on both Kimi-family heads (kimi-k2-mla: Llama EAGLE-3 head; kimi-k2-mla-mlahead: the
# Kimi-K2.5 MLA head): serve_checks' timing part WITHOUT simulated acceptance, so the dummy drafter accepts
# nothing, the alarm must fire in the server log and /spec_timing's verdict must say so. Same flags as
# kimi_family.sh. Carry [".gpu"]; from the repo root on the GPU machine:
#   bash benchmarks/gpu_plans/kimi_alarm.sh [BUDGET_S]     (default 560; results $OUT/alarm.tgz, a table line per head)
set -u
BUDGET=${1:-560}
SECONDS=0
source .gpu/env.sh >/dev/null || { echo "env.sh failed"; exit 1; }
export SGLANG_PATCHES_CACHE=/tmp/spcache PYTHONUNBUFFERED=1
python -m pip install -q --no-deps --no-build-isolation --no-index -e . > "$OUT/pip.txt" 2>&1 || tail -3 "$OUT/pip.txt"
X="--mem-fraction-static 0.6 --num-continuous-decode-steps 4 --disable-custom-all-reduce \
--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4 --cuda-graph-max-bs-decode 16"
for pair in llama_head:kimi-k2-mla mla_head:kimi-k2-mla-mlahead; do
  python benchmarks/serve_checks.py --out "$OUT/alarm/${pair%%:*}" --fixture "${pair#*:}" --parts timing \
    --extra "$X" --deadline $((BUDGET - SECONDS)) 2>&1 | tail -n 3 >> "$OUT/table.txt"
  grep -h "ACCEPT LENGTH COLLAPSE" "$OUT/alarm/${pair%%:*}"/*/server.log | head -n 2 | cut -c1-240 >> "$OUT/table.txt"
done
echo "elapsed ${SECONDS}s" >> "$OUT/table.txt"
# The machine returns a limited number of files per call: pack the heads' folders into one archive.
( cd "$OUT" && find alarm -type f -size -2M > keep.txt && tar czf alarm.tgz -T keep.txt && rm -rf alarm keep.txt )
cut -c1-300 "$OUT/table.txt"
