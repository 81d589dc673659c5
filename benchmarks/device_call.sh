#!/usr/bin/env bash
# One call on the lent GPU machine: install the overlay from the carried bundle, build the dummy
# fixtures once (lanes would race on them), run benchmarks side by side with run_lanes.py, then pack
# the results so they come back within the device tool's limits (8 files, 16 MiB each) and stop any
# SGLang server a lane left behind (servers run in their own sessions and would hold the GPUs).
#
#   bash benchmarks/device_call.sh --args-file LANES.txt    # run_lanes.py arguments, one per line
#   bash benchmarks/device_call.sh --deadline=540 --lane "name|0|cmd ;; cmd" ...
#
# carry [".gpu", <the lanes file's folder>]. Results: $OUT/small.tgz (every file up to 1 MiB except
# torch traces: always comes back), $OUT/big.tgz (the rest, when it fits 15 MiB), $OUT/lanes.json.
set -u
OUT=${OUT:?run this through the device tool: \$OUT must be set}
source .gpu/env.sh && python -m pip install -q --no-deps --no-build-isolation --no-index -e . >/dev/null 2>&1 \
  || { echo "device_call: installing the overlay failed"; exit 1; }
export SGLANG_PATCHES_CACHE=${SGLANG_PATCHES_CACHE:-/tmp/spcache}
R=/tmp/r
mkdir -p $R
nvidia-smi --query-gpu=index,name,memory.used --format=csv,noheader
python -c "from sglang_patches.fixtures import ensure_fixture as e; [e(n) for n in ('llama3-8b', 'llama3-1b', 'qwen3-moe-shape')]" || exit 1
if [ "${1:-}" = "--args-file" ]; then mapfile -t ARGS < "$2"; else ARGS=("$@"); fi
python benchmarks/run_lanes.py --out $R "${ARGS[@]}" > /tmp/lanes.txt 2>&1
rc=$?
pkill -f "sglang_patches.launch|sglang.launch_server" 2>/dev/null; sleep 2; pkill -9 -f "sglang::|sglang_patches.launch" 2>/dev/null
cd /tmp
find r -type f -size -1025k ! -name '*trace.json*' | sort > /tmp/small.txt
find r -type f ! -size -1025k -o -type f -name '*trace.json*' | sort > /tmp/big.txt
tar czf $OUT/small.tgz -T /tmp/small.txt
cp r/lanes.json $OUT/ 2>/dev/null
if [ -s /tmp/big.txt ]; then
  tar czf /tmp/big.tgz -T /tmp/big.txt
  if [ "$(stat -c %s /tmp/big.tgz)" -le $((15 * 1024 * 1024)) ]; then mv /tmp/big.tgz $OUT/;
  else echo "device_call: big.tgz over 15 MiB, left on the machine: $(wc -l < /tmp/big.txt) files"; fi
fi
ls -la $OUT
for f in r/logs/*.log; do echo "== $f"; tail -n 14 "$f" | cut -c1-400; done
cat /tmp/lanes.txt
exit $rc
