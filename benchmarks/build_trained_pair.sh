#!/usr/bin/env bash
# Build the `trained` EAGLE-3 fixture (tokenizer + small Llama target + EAGLE-3 drafter, trained
# on this machine's Python stdlib sources) on the GPU machine, in about 4 minutes on one H200.
#
#   source .gpu/env.sh && pip install --no-deps --no-build-isolation --no-index -e .
#   bash benchmarks/build_trained_pair.sh DIR [--seed 0] [--max-seconds 400] [--force]
#
# DIR gets target/, draft/ (HF dirs with model.safetensors + tokenizer), fixture.json and
# train_report.json (seed, steps, time, losses, an offline accept-length estimate on the shipped
# held-out prompts). When $OUT is set (device runs) the report and the build log are copied there.
# Then run SGLang with, e.g.:
#   --model-path DIR/target --speculative-algorithm EAGLE3 --speculative-draft-model-path DIR/draft \
#   --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4 \
#   --attention-backend triton --sampling-backend pytorch
# and prompts from sglang_patches/data/eval_prompts.jsonl (temperature 0).
set -euo pipefail
if [ $# -lt 1 ] || [[ "$1" == -* ]]; then
  sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
DIR=$1; shift
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=true
# The tokenizer cache lives next to the output unless the caller chose one.
export SGLANG_PATCHES_CACHE=${SGLANG_PATCHES_CACHE:-$(dirname "$DIR")/.sglang_patches_cache}
LOG=$(mktemp /tmp/build_trained_pair.XXXXXX.log)
set +e
python -m sglang_patches fixtures build trained --out "$DIR" "$@" 2>&1 | tee "$LOG"
rc=${PIPESTATUS[0]}
set -e
if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT/trained_pair"
  cp "$LOG" "$OUT/trained_pair/build.log"
  [ -f "$DIR/train_report.json" ] && cp "$DIR/train_report.json" "$OUT/trained_pair/"
fi
if [ $rc -eq 0 ]; then
  python - "$DIR/train_report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
t, d, e = r["target"], r["drafter"], r["eval"]
print(f"trained pair: {r['total_seconds']:.0f}s on {r['device_name']}; target {t['steps']} steps loss "
      f"{t['final_loss']:.3f}{' (time cap)' if t['truncated_by_time'] else ''}; drafter {d['steps']} steps loss "
      f"{d['final_loss']:.3f}{' (time cap)' if d['truncated_by_time'] else ''}; "
      f"offline accept-length estimate {e['accept_len_est']} (per-step acc {e.get('step_acc')})")
PY
fi
exit $rc
