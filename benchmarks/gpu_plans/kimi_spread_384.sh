#!/usr/bin/env bash
# Distinct experts per MoE layer at Kimi-K2.5's 384 routed experts (kimi-k25-384-int4), where the top_k x T bound
# (8T) is far below the expert count, unlike kimi-k2-mla's 16 experts (saturated at T = 4). The INT4 target needs
# SGLang's moe_wna16_marlin module: compiled here first (233-270 s on a fresh machine; a few seconds when this
# machine's /tmp/tvm-ffi already has it), then moe_expert_spread.py with the time left. Carry [".gpu"]:
#   bash benchmarks/gpu_plans/kimi_spread_384.sh [DEADLINE_S] [DRAFT_TOKENS]   (default 580 8,4,1; log $OUT/spread384.txt)
set -u
DEADLINE=${1:-580}
TOKENS=${2:-8,4,1}
SECONDS=0
source .gpu/env.sh >/dev/null || { echo "env.sh failed"; exit 1; }
export SGLANG_PATCHES_CACHE=/tmp/spcache TVM_FFI_CACHE_DIR=/tmp/tvm-ffi
mkdir -p "$TVM_FFI_CACHE_DIR" "$OUT"
python -m pip install -q --no-deps --no-build-isolation --no-index -e . > "$OUT/pip.txt" 2>&1 || tail -5 "$OUT/pip.txt"
R="$OUT/spread384.txt"
timeout $((DEADLINE - 20)) python - >> "$R" 2>&1 <<'PY'
import time, torch
from sglang.kernels.ops.moe.moe_wna16_marlin import _jit_moe_wna16_marlin_module
t = time.time()
_jit_moe_wna16_marlin_module(torch.bfloat16, False, False)
print(f"moe_wna16_marlin compiled (or loaded) in {time.time() - t:.0f} s", flush=True)
PY
echo "compile step exit $? at ${SECONDS}s" >> "$R"
LEFT=$((DEADLINE - SECONDS - 15))
if grep -q "moe_wna16_marlin compiled" "$R" && [ $LEFT -gt 150 ]; then
  timeout $LEFT python benchmarks/moe_expert_spread.py --out "$OUT/sp384" --fixture kimi-k25-384-int4 \
    --draft-tokens "$TOKENS" --routing uniform --deadline $((LEFT - 15)) \
    --extra "--mem-fraction-static 0.88 --disable-custom-all-reduce" 2>&1 | tail -n 8 >> "$R"
  rm -rf "$OUT"/sp384/dumps-*
fi
echo "all done at ${SECONDS}s" >> "$R"
cut -c1-200 "$R" | tail -n 30
