#!/usr/bin/env bash
# The Kimi-K2 family fixtures on one GPU (SGLang 0.5.17 bundle), within 570 s. From the repo root:
#   source .gpu/env.sh && OUT=/tmp/out bash benchmarks/gpu_plans/kimi_family.sh
# For kimi-k2-mla (Llama head) and kimi-k2-mla-mlahead (MLA head): serve with timing + simulated
# acceptance, greedy requests at bs 1 and 8, timing records vs summed spec_verify_ct, `report`; the
# flag bug (EAGLE with an EAGLE-3 head) through preflight and, with --skip-preflight, in the server
# (exit code, last line); Llama head: --draft-backend triton --draft-weights fp8 vs stock draft ms at bs 1.
# Results under $OUT; a short table is printed last.
set -u
OUT=${OUT:?set OUT to a results folder}
mkdir -p "$OUT"
python -m pip install -q --no-deps --no-build-isolation --no-index -e . >/dev/null 2>&1 || true
export SGLANG_PATCHES_CACHE=${SGLANG_PATCHES_CACHE:-/tmp/spcache}
T0=$(date +%s); BUDGET=570; PORT=30077
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
SERVE=(--attention-backend triton --sampling-backend pytorch --mem-fraction-static 0.6
       --num-continuous-decode-steps 4 --disable-custom-all-reduce
       --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4 --port $PORT)
python -c "from sglang_patches.offline.fixtures import ensure_fixture as e; [e(n) for n in ('kimi-k2-mla', 'kimi-k2-mla-mlahead')]" \
  > "$OUT/build.log" 2>&1 || { echo "fixture build failed"; tail -3 "$OUT/build.log"; exit 1; }
FX=$SGLANG_PATCHES_CACHE/fixtures
declare -A ROW

stop() {  # kill the server's process group, then wait for it
  kill -TERM -- "-$1" 2>/dev/null; sleep 5; kill -KILL -- "-$1" 2>/dev/null; wait "$1" 2>/dev/null
}

ready() {  # wait for /health_generate up to $2 seconds, or until the server exits
  local pid=$1 until=$(( $(date +%s) + $2 ))
  while [ "$(date +%s)" -lt "$until" ]; do
    kill -0 "$pid" 2>/dev/null || return 1
    curl -sf -m 5 "http://127.0.0.1:$PORT/health_generate" >/dev/null && return 0
    sleep 3
  done
  return 1
}

requests() {  # $1 tag, $2 timing log: bs 1 then bs 8 greedy requests; records vs summed spec_verify_ct
  python - "$1" "$2" "$OUT" "$PORT" <<'PY'
import concurrent.futures as cf, json, sys, time, urllib.request
tag, log, out, port = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
def gen(i):
    body = json.dumps({"text": f"def f{i}(x):\n    return", "sampling_params": {"temperature": 0, "max_new_tokens": 64,
                                                                              "ignore_eos": True}}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/generate", body, {"Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(req, timeout=120).read())["meta_info"]
def count():
    try:
        return sum(1 for ln in open(log) if '"decode"' in ln)
    except OSError:
        return 0
res = {}
for bs in (1, 8):
    time.sleep(1.0); before = count()
    with cf.ThreadPoolExecutor(bs) as ex:
        metas = list(ex.map(gen, range(bs)))
    time.sleep(2.5)
    recs = [json.loads(ln) for ln in open(log)][before:] if count() else []
    live = [r for r in recs if r.get("kind") == "decode" and r.get("accepted")]
    ct = sum(int(m.get("spec_verify_ct") or 0) for m in metas)
    draft = sorted(r["draft_ms"] for r in live) if live else []
    res[f"bs{bs}"] = {"records": len(live), "spec_verify_ct": ct, "equal": len(live) == ct,
                      "draft_ms_p50": draft[len(draft) // 2] if draft else None,
                      "accept_len": [m.get("spec_accept_length") for m in metas][:2]}
json.dump(res, open(f"{out}/{tag}_requests.json", "w"), indent=1)
print(json.dumps(res))
PY
}

serve_and_measure() {  # $1 tag, $2 fixture, $3... extra launcher flags
  local tag=$1 fx=$2; shift 2
  if [ "$(left)" -lt 200 ]; then ROW[$tag]="skipped (time)"; return; fi
  local log="$OUT/${tag}_timing.jsonl"
  setsid python -m sglang_patches.launch --fixture "$fx" --timing-log "$log" "${SERVE[@]}" "$@" \
    > "$OUT/${tag}_server.log" 2>&1 &
  local pid=$!
  if ready "$pid" $(( $(left) - 20 < 180 ? 180 : $(left) - 20 )); then
    ROW[$tag]=$(timeout 120 requests "$tag" "$log" 2>>"$OUT/${tag}_client.err" | tail -1)
    sglang-patches report "$log" > "$OUT/${tag}_report.txt" 2>&1 || python -m sglang_patches report "$log" > "$OUT/${tag}_report.txt" 2>&1
  else
    ROW[$tag]="server not ready: $(tail -1 "$OUT/${tag}_server.log" | cut -c1-150)"
  fi
  stop "$pid"
}

flag_bug() {  # $1 tag, $2 fixture: preflight refusal, then the in-server catch with --skip-preflight
  local tag=$1 fx=$2
  python -m sglang_patches preflight --model-path "$FX/$fx/target" --speculative-draft-model-path "$FX/$fx/draft" \
    --speculative-algorithm EAGLE --load-format dummy \
    > "$OUT/${tag}_preflight.txt" 2>&1
  local prc=$?
  if [ "$(left)" -lt 190 ]; then ROW[$tag]="preflight rc=$prc; server skipped (time)"; return; fi
  timeout -k 10 200 setsid python -m sglang_patches.launch --fixture "$fx" \
    --skip-preflight --speculative-algorithm EAGLE "${SERVE[@]}" > "$OUT/${tag}_server.log" 2>&1
  local rc=$?
  ROW[$tag]="preflight rc=$prc; server rc=$rc; last: $(tail -1 "$OUT/${tag}_server.log" | cut -c1-160)"
}

serve_and_measure llama_stock kimi-k2-mla --simulate-acceptance 0.8,0.7,0.6
serve_and_measure mla_stock kimi-k2-mla-mlahead --simulate-acceptance 0.8,0.7,0.6
serve_and_measure llama_fp8 kimi-k2-mla --simulate-acceptance 0.8,0.7,0.6 --draft-backend triton --draft-weights fp8
flag_bug llama_flagbug kimi-k2-mla
flag_bug mla_flagbug kimi-k2-mla-mlahead

{
  for k in llama_stock mla_stock llama_fp8 llama_flagbug mla_flagbug; do echo "$k|${ROW[$k]:-not run}"; done
} > "$OUT/table.txt"
echo "elapsed $(( $(date +%s) - T0 )) s"
column -t -s'|' "$OUT/table.txt" 2>/dev/null || cat "$OUT/table.txt"
