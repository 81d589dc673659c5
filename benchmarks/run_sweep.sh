#!/usr/bin/env bash
# EAGLE-3 sweep on one GPU (sglang-patches sweep): one server per configuration, one at a time.
#
#   source .gpu/env.sh
#   bash benchmarks/run_sweep.sh [FIXTURE] [OUT_DIR] [STEPS] [TOPK] [DRAFT_TOKENS] [BATCH_SIZES] [-- more sweep flags]
#
# Defaults (about 5-7 minutes on one H200: 5 servers of ~45-70 s start each + measurement):
#   FIXTURE=llama3-1b OUT_DIR=${OUT:-runs}/sweep-<fixture> STEPS=1,2,3,5 TOPK=1 DRAFT_TOKENS=2,4,8
#   BATCH_SIZES=1,16, --max-new-tokens 128 --repeats 3 --timeout-per-config 240
# Env: SIM_ACC (default 3.3; empty = off) sets SGLANG_SIMULATE_ACC_LEN for the servers: the dummy
# fixtures have random weights (accept length ~1), so acceptance is simulated for timing studies.
# Use FIXTURE=trained (after benchmarks/build_trained_pair.sh) and SIM_ACC= for real acceptance.
# Extra flags after `--` go to the sweep, e.g. -- --search, -- --resume, -- --force,
# -- --extra-server-args "--mem-fraction-static 0.8". Results: OUT_DIR/summary.md, *.png, results.jsonl.
set -euo pipefail
if [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then
  sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
cd "$(dirname "$0")/.."
FIXTURE=${1:-llama3-1b}
OUT_DIR=${2:-${OUT:-runs}/sweep-$FIXTURE}
STEPS=${3:-1,2,3,5}
TOPK=${4:-1}
DRAFT_TOKENS=${5:-2,4,8}
BATCH_SIZES=${6:-1,16}
shift $(( $# < 6 ? $# : 6 ))
[[ "${1:-}" == "--" ]] && shift
SIM_ACC=${SIM_ACC-3.3}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
args=(--fixture "$FIXTURE" --out "$OUT_DIR" --steps "$STEPS" --topk "$TOPK" --draft-tokens "$DRAFT_TOKENS"
      --batch-sizes "$BATCH_SIZES" --max-new-tokens 128 --repeats 3 --timeout-per-config 240)
[[ -n "$SIM_ACC" ]] && args+=(--simulate-acc-len "$SIM_ACC")
python -m sglang_patches sweep "${args[@]}" --dry-run
echo "== sweep into $OUT_DIR ($(date -Is))"
set +e
python -m sglang_patches sweep "${args[@]}" "$@"
rc=$?
set -e
if [[ -n "${OUT:-}" && -d "$OUT_DIR" && "$OUT_DIR" != "$OUT"* ]]; then
  mkdir -p "$OUT/sweep"
  cp "$OUT_DIR"/{results.jsonl,summary.md,sweep.json,plan.json} "$OUT/sweep/" 2>/dev/null || true
  cp "$OUT_DIR"/*.png "$OUT/sweep/" 2>/dev/null || true
  mkdir -p "$OUT/sweep/logs" && for f in "$OUT_DIR"/logs/*.log; do [[ -f "$f" ]] && tail -n 200 "$f" > "$OUT/sweep/logs/$(basename "$f")"; done
fi
[[ -f "$OUT_DIR/summary.md" ]] && cat "$OUT_DIR/summary.md"
echo "== exit $rc (0 all ok, 1 some rows failed, 2 bad input)"
exit $rc
