#!/usr/bin/env bash
# One bounded run (at most 10 minutes) of a plan file on this project's offline GPU machine: install the
# overlay from the carried bundle, build the dummy fixtures once (side-by-side jobs would race on them),
# run the plan's benchmarks side by side with run_parallel.py, then pack the results so they come back
# within the machine's transfer limits (8 files, 16 MiB each) and stop any SGLang server a job left
# behind (servers run in their own sessions and would hold the GPUs).
#
#   bash benchmarks/gpu_run.sh --args-file benchmarks/gpu_plans/PLAN.txt   # run_parallel.py arguments, one per line
#   bash benchmarks/gpu_run.sh --deadline=540 --job "name|0|cmd ;; cmd" ...
#
# Carry [".gpu", <the plan file's folder>]. Results: $OUT/small.tgz (every file up to 1 MiB except
# torch traces: always comes back), $OUT/big.tgz (the rest, when it fits 15 MiB), $OUT/jobs.json.
set -u
OUT=${OUT:?run this on the GPU machine: \$OUT must be set}
source .gpu/env.sh && python -m pip install -q --no-deps --no-build-isolation --no-index -e . >/dev/null 2>&1 \
  || { echo "gpu_run: installing the overlay failed"; exit 1; }
export SGLANG_PATCHES_CACHE=${SGLANG_PATCHES_CACHE:-/tmp/spcache}
R=/tmp/r
mkdir -p $R
nvidia-smi --query-gpu=index,name,memory.used --format=csv,noheader
python -c "from sglang_patches.offline.fixtures import ensure_fixture as e; [e(n) for n in ('llama3-8b', 'llama3-1b', 'qwen3-moe-shape')]" || exit 1
if [ "${1:-}" = "--args-file" ]; then mapfile -t ARGS < "$2"; else ARGS=("$@"); fi
python benchmarks/run_parallel.py --out $R "${ARGS[@]}" > /tmp/jobs.txt 2>&1
rc=$?
pkill -f "sglang_patches.launch|sglang.launch_server" 2>/dev/null; sleep 2; pkill -9 -f "sglang::|sglang_patches.launch" 2>/dev/null
cd /tmp
find r -type f -size -1025k ! -name '*trace.json*' | sort > /tmp/small.txt
find r -type f ! -size -1025k -o -type f -name '*trace.json*' | sort > /tmp/big.txt
tar czf $OUT/small.tgz -T /tmp/small.txt
cp r/jobs.json $OUT/ 2>/dev/null
if [ -s /tmp/big.txt ]; then
  tar czf /tmp/big.tgz -T /tmp/big.txt
  if [ "$(stat -c %s /tmp/big.tgz)" -le $((15 * 1024 * 1024)) ]; then mv /tmp/big.tgz $OUT/;
  else echo "gpu_run: big.tgz over 15 MiB, left on the machine: $(wc -l < /tmp/big.txt) files"; fi
fi
ls -la $OUT
for f in r/logs/*.log; do echo "== $f"; tail -n 14 "$f" | cut -c1-400; done
cat /tmp/jobs.txt
exit $rc
