#!/usr/bin/env bash
# Why the INT4 Kimi target (kimi-k2-mla-int4, SGLang's compressed-tensors WNA16 Marlin MoE) never finished its
# first forward on the 0.5.17 bundle: start it without CUDA graphs, send one request, and while it waits take
# py-spy dumps of the scheduler, the GPU's utilisation and the busiest processes (a compiler at first use, or a
# kernel that never returns); then wait for the request up to the deadline. Carry [".gpu"]; from the repo root:
#   bash benchmarks/gpu_plans/kimi_int4_probe.sh [DEADLINE_S]        (default 420; results in $OUT/int4_probe.txt)
set -u
DEADLINE=${1:-420}
SECONDS=0
source .gpu/env.sh >/dev/null || { echo "env.sh failed"; exit 1; }
export SGLANG_PATCHES_CACHE=/tmp/spcache
python -m pip install -q --no-deps --no-build-isolation --no-index -e . > "$OUT/pip.txt" 2>&1 || tail -5 "$OUT/pip.txt"
R="$OUT/int4_probe.txt"
python -m sglang_patches.launch --fixture kimi-k2-mla-int4 --port 30100 --mem-fraction-static 0.6 \
  --disable-cuda-graph --disable-custom-all-reduce --attention-backend triton --sampling-backend pytorch \
  > "$OUT/server.log" 2>&1 &
SRV=$!
until grep -q "Uvicorn running" "$OUT/server.log" 2>/dev/null || [ $SECONDS -gt 200 ]; do sleep 2; done
echo "ready at ${SECONDS}s" | tee -a "$R"
( t0=$SECONDS; curl -s -m $((DEADLINE - SECONDS - 20)) http://127.0.0.1:30100/generate -H 'Content-Type: application/json' \
    -d '{"text": "Hello", "sampling_params": {"max_new_tokens": 8, "temperature": 0}}' > "$OUT/reply.json";
  echo "request returned rc=$? after $((SECONDS - t0))s: $(head -c 300 "$OUT/reply.json")" >> "$R" ) &
READY=$SECONDS
for after in 30 90 150; do       # seconds after the request was sent
  while [ $SECONDS -lt $((READY + after)) ] && ! grep -q "request returned" "$R"; do sleep 1; done
  grep -q "request returned" "$R" && break
  { echo "== ${SECONDS}s: GPU"; nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader
    echo "== busiest processes"; ps -eo pid,pcpu,etimes,comm --sort=-pcpu | head -8
    for pid in $(pgrep -f "sglang::scheduler"); do echo "== py-spy dump $pid"; py-spy dump --pid "$pid" 2>&1 | head -60; done
  } >> "$R" 2>&1
done
while ! grep -q "request returned" "$R" && [ $SECONDS -lt $((DEADLINE - 15)) ]; do sleep 2; done
kill $SRV 2>/dev/null; sleep 3; pkill -f "sglang_patches.launch --fixture kimi-k2-mla-int4" 2>/dev/null
grep -nE "Error|Traceback|Marlin|WNA16|jit|compil" "$OUT/server.log" | tail -n 12 | cut -c1-250
tail -n 70 "$R" | cut -c1-200
