#!/usr/bin/env bash
# Why the INT4 Kimi target (kimi-k2-mla-int4) never finished its first forward on the 0.5.17 bundle. SGLang's
# compressed-tensors WNA16 MoE method runs `moe_wna16_marlin_gemm`, a kernel SGLang compiles at first use
# (sglang/kernels/ops/moe/moe_wna16_marlin.py: load_jit, nvcc through tvm-ffi, cached in TVM_FFI_CACHE_DIR). This
# call compiles that module alone, timed, with the busiest processes every 60 s; packs the cache into
# $OUT/jit-cache.tgz (keep it git-ignored as .gpu-jit/ and carry it: the next call skips the compile); then, if
# time is left, serves the target with the timing part. Carry [".gpu"] (and ".gpu-jit" once it exists):
#   bash benchmarks/gpu_plans/kimi_int4_probe.sh [DEADLINE_S]        (default 580; the log is $OUT/int4_probe.txt)
set -u
DEADLINE=${1:-580}
SECONDS=0
source .gpu/env.sh >/dev/null || { echo "env.sh failed"; exit 1; }
export SGLANG_PATCHES_CACHE=/tmp/spcache TVM_FFI_CACHE_DIR=/tmp/tvm-ffi
mkdir -p "$TVM_FFI_CACHE_DIR"
[ -d .gpu-jit ] && cp -r .gpu-jit/. "$TVM_FFI_CACHE_DIR"/
python -m pip install -q --no-deps --no-build-isolation --no-index -e . > "$OUT/pip.txt" 2>&1 || tail -5 "$OUT/pip.txt"
R="$OUT/int4_probe.txt"
{ echo "nvcc: $(command -v nvcc || echo none)"; nvcc --version 2>&1 | tail -1; } >> "$R"
timeout $((DEADLINE - 20)) python - >> "$R" 2>&1 <<'PY' &
import time, torch
from sglang.kernels.ops.moe.moe_wna16_marlin import _jit_moe_wna16_marlin_module
t = time.time()
_jit_moe_wna16_marlin_module(torch.bfloat16, False, False)
print(f"moe_wna16_marlin compiled (or loaded) in {time.time() - t:.0f} s", flush=True)
PY
JIT=$!
while kill -0 $JIT 2>/dev/null; do
  sleep 60
  kill -0 $JIT 2>/dev/null && { echo "== ${SECONDS}s: busiest"; ps -eo pid,pcpu,etimes,comm --sort=-pcpu | head -6; } >> "$R"
done
wait $JIT; echo "compile step exit $? at ${SECONDS}s" >> "$R"
( cd "$TVM_FFI_CACHE_DIR" && tar czf "$OUT/jit-cache.tgz" . ) && ls -la "$OUT/jit-cache.tgz" >> "$R"
LEFT=$((DEADLINE - SECONDS - 10))
if grep -q "moe_wna16_marlin compiled" "$R" && [ $LEFT -gt 200 ]; then
  timeout $LEFT python benchmarks/serve_checks.py --out "$OUT/int4" --fixture kimi-k2-mla-int4 --parts timing \
    --simulate-acceptance 0.8,0.7,0.6 --deadline $LEFT \
    --extra "--mem-fraction-static 0.6 --num-continuous-decode-steps 4 --disable-custom-all-reduce" 2>&1 | tail -n 6 >> "$R"
  ( cd "$OUT" && find int4 -type f -size -2M > keep.txt && tar czf int4.tgz -T keep.txt && rm -rf int4 keep.txt )
fi
echo "all done at ${SECONDS}s" >> "$R"
cat "$R" | cut -c1-200 | tail -n 60
