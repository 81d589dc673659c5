#!/usr/bin/env bash
# SGLang 0.5.17 vs 0.5.23 on one machine: plain decode and EAGLE3 3/1/4 (`s3`) on trained-8b under SGLang's
# bench_serving (held-out stdlib prompts `in` and the ood set, concurrency 1 and 8), via benchmarks/adaptive_bench.py.
# One bundle per call (the two do not fit one carry): first carry .gpu, then, on the same warm machine within 30 s,
# carry .gpu-0523; the second reuses the first's trained-8b build (/tmp/spcache; the build id is recorded per cell).
#   bash benchmarks/gpu_plans/sglang_pair.sh 0.5.17 [CASES] [DEADLINE_S]    (carry .gpu;      default s3,plain 575)
#   bash benchmarks/gpu_plans/sglang_pair.sh 0.5.23 [CASES] [DEADLINE_S]    (carry .gpu-0523)
# Results: $OUT/pair-VERSION.tgz (adaptive_bench's export), its table last. A rerun on a warm machine resumes.
set -u
VER=${1:?usage: sglang_pair.sh 0.5.17|0.5.23 [CASES] [DEADLINE_S]}
CASES=${2:-s3,plain}
DEADLINE=${3:-575}
case "$VER" in
  0.5.17) ENVSH=.gpu/env.sh ;;
  0.5.23) ENVSH=.gpu-0523/env.sh ;;
  *) echo "sglang_pair.sh: version $VER is not 0.5.17 or 0.5.23"; exit 2 ;;
esac
source "$ENVSH" > /dev/null || { echo "$ENVSH failed"; exit 1; }
export SGLANG_PATCHES_CACHE=/tmp/spcache
mkdir -p "$OUT"
python -m pip install -q --no-deps --no-build-isolation --no-index -e . > "$OUT/pip.txt" 2>&1 || tail -5 "$OUT/pip.txt"
python -c 'import sglang, torch; print("sglang", sglang.__version__, "torch", torch.__version__)'
python benchmarks/adaptive_bench.py --out "/tmp/pair-$VER" --export "$OUT/pair-$VER" --cases "$CASES" \
  --deadline "$DEADLINE" 2>&1 | tail -n 30
( cd "$OUT" && tar czf "pair-$VER.tgz" "pair-$VER" && rm -rf "pair-$VER" )
