#!/usr/bin/env bash
# The Kimi-K2 family fixtures (kimi-k2-mla: Llama EAGLE-3 head; kimi-k2-mla-mlahead: the Kimi-K2.5 MLA
# head) on one GPU, through benchmarks/serve_checks.py. Carry a bundle; from the repo root:
#   source .gpu/env.sh && bash benchmarks/gpu_plans/kimi_family.sh        (0.5.17; .gpu-0523 for 0.5.23)
# Served with that deployment's flags (TP1 here, --mem-fraction-static 0.6: at 0.85 the drafter's KV
# pool did not fit 80 GB), EAGLE3 3/1/4, simulated per-position acceptance 0.8,0.7,0.6. In order of
# worth (CUDA graphs up to batch 16 only, to start faster): timing on both heads, the flag bug on both heads, FP8 draft path on the Llama head.
# Results in $OUT/heads.tgz (<head>/<part>.json); one table line per part at the end. KIMI_BUDGET (default 570 s).
set -u
BUDGET=${KIMI_BUDGET:-570}
SECONDS=0
export SGLANG_PATCHES_CACHE=${SGLANG_PATCHES_CACHE:-/tmp/spcache}
python -m pip install -q --no-deps --no-build-isolation --no-index -e . > "$OUT/pip.txt" 2>&1 || tail -3 "$OUT/pip.txt"
X="--mem-fraction-static ${KIMI_MEM:-0.6} --num-continuous-decode-steps 4 --disable-custom-all-reduce \
--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4 --cuda-graph-max-bs-decode 16"
run() {  # $1 head folder, $2 fixture, $3 parts
  python benchmarks/serve_checks.py --out "$OUT/$1" --fixture "$2" --parts "$3" --simulate-acceptance 0.8,0.7,0.6 \
    --extra "$X" --deadline $((BUDGET - SECONDS)) 2>&1 | tail -n 4 >> "$OUT/table.txt"
}
run llama_head kimi-k2-mla timing
run mla_head kimi-k2-mla-mlahead timing
run llama_head kimi-k2-mla flagbug
run mla_head kimi-k2-mla-mlahead flagbug
run llama_head kimi-k2-mla fp8
echo "elapsed ${SECONDS}s"
# The machine returns a limited number of files per call: pack the heads' folders into one archive.
( cd "$OUT" && tar czf heads.tgz llama_head mla_head && rm -rf llama_head mla_head )
cut -c1-400 "$OUT/table.txt"
