"""Bad-input cases for the launcher (`sglang_patches.launch`, in-process and as a child process: its
checks before anything is spawned) and for the plugin's SGLANG_PATCHES_CONFIG (what SGLang's
load_plugins() runs in every process). Builders and the Case type: bad_input_corpus.py; run by
tests/test_bad_input_corpus.py."""
from __future__ import annotations

from bad_input_corpus import DEEP, DRAFT, DVOCAB, H, VOCAB, Cases, log, pair, pair_raw_config, rec, regular_file
from preflight_models import eagle3_tensors

CASES = Cases()
case = CASES.case

# --- launcher (pre-spawn checks) ---------------------------------------------------------------
LA = ["--model-path", "{d}/target", "--speculative-draft-model-path", "{d}/draft", "--speculative-algorithm", "EAGLE3"]


def launch(name, argv, expect, setup=None, code=2, runner="launch", **env):
    case(name, runner, argv, code, expect, setup, **env)


for flag, value, why in (("--timing-log-max-mb", "nan", "not a finite number"),
                         ("--timing-log-max-mb", "inf", "not a finite number"),
                         ("--timing-log-max-mb", "-1", "must be a number of megabytes"),
                         ("--timing-log-max-mb", "0", "must be a number of megabytes"),
                         ("--timing-log-max-mb", "big", "invalid number"),
                         ("--timing-summary-interval", "-1", "integer >= 0"),
                         ("--timing-summary-interval", "x", "invalid int value"),
                         ("--draft-tp-size", "0", "positive integer"), ("--draft-tp-size", "two", "invalid int value"),
                         ("--patches", "bogus", "unknown feature"), ("--draft-backend", "cuda", "invalid choice"),
                         ("--speculative-num-steps", "--3", "expected an integer"),
                         ("--speculative-num-steps", "abc", "expected an integer"),
                         ("--speculative-num-steps", "0", "expected an integer >= 1"),
                         ("--speculative-eagle-topk", "1.5", "expected an integer"),
                         ("--speculative-num-draft-tokens", "-4", "expected an integer"),
                         ("--tp-size", "0", "expected an integer"), ("--port", "70000", "from 1 to 65535"),
                         ("--port", "http", "from 1 to 65535"), ("--fixture", "nope", "unknown fixture"),
                         ("--timing-log", "{d}/nodir/c.jsonl", "does not exist"),
                         ("--timing-log", "{d}", "is a directory"),
                         ("--timing-log", "{d}/file/c.jsonl", "not a directory"),
                         ("--timing-log", "/proc/sgp/c.jsonl", "under /proc"),
                         ("--timing-log", "{d}/target/cycles.jsonl", "inside --model-path"),
                         ("--timing-log", "{d}/draft/config.json", "inside --speculative-draft-model-path")):
    launch(f"launch{flag}-{value}"[:60], LA + [flag, value], why, lambda d: (pair(d), regular_file(d)) and None)
LS = LA + ["--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]
for value, why in (("1.5", "outside [0, 1]"), ("nan", "finite"), ("0.5,x", "not a number"), ("", "empty"),
                   ("0.5,,0.5", "empty entry"), (",".join(["0.5"] * 17), "")):
    launch(f"launch-simulate-acceptance-{value[:12]}", LS + ["--simulate-acceptance", value], why, pair)
launch("launch-simulate-from-missing", LS + ["--simulate-acceptance-from", "{d}/nope.jsonl"], "no such file", pair)
launch("launch-simulate-from-bad-log", LS + ["--simulate-acceptance-from", "{d}/log.jsonl"], "no valid timing records",
       lambda d: (pair(d), log(d, rec(bs=-2))) and None)
launch("launch-simulate-from-is-timing-log", LS + ["--simulate-acceptance-from", "{d}/log.jsonl", "--timing-log",
                                                    "{d}/log.jsonl"], "is also", lambda d: (pair(d), log(d, rec())) and None)
for flag, value, why in (("--accept-collapse-window", "0", "at least 1"), ("--accept-collapse-threshold", "1", "> 1"),
                         ("--accept-collapse-threshold", "nan", "not a finite number"),
                         ("--on-accept-collapse", "stop", "invalid choice")):
    launch(f"launch{flag}-{value}", LA + [flag, value], why, pair)
launch("launch-port-missing-value", LA + ["--port"], "needs a value", pair)
launch("launch-timing-log-equals", LA + ["--timing-log=" + "{d}/target/config.json"], "inside --model-path", pair)
launch("launch-preflight-finding", LA[:-1] + ["EAGLE"], "preflight found problems", pair, code=1)
launch("launch-preflight-bad-config", LA, "not valid JSON", lambda d: pair_raw_config(d, "draft", "{x"))
launch("launch-preflight-deep-config", LA, "nested too deeply", lambda d: pair_raw_config(d, "target", DEEP))
launch("launch-preflight-fc-zero", LA, "'fc.weight' has shape",
       lambda d: pair(d, tensors={**eagle3_tensors(H, 3 * H, DVOCAB, VOCAB), "fc.weight": ("BF16", [256, 0])}))
launch("launch-triton-architectures-number", LA + ["--draft-backend", "triton", "--skip-preflight"],
       "architectures must be a list", lambda d: pair(d, draft={**DRAFT, "architectures": 3}))
launch("launch-triton-architectures-string", LA + ["--draft-backend", "triton", "--skip-preflight"],
       "architectures must be a list", lambda d: pair(d, draft={**DRAFT, "architectures": "LlamaForCausalLMEagle3"}))
launch("launch-triton-config-deep", LA + ["--draft-backend", "triton", "--skip-preflight"], "cannot read",
       lambda d: pair_raw_config(d, "draft", DEEP))
launch("launch-no-gpu", ["--model-path", "{d}/target", "--skip-preflight"], "no CUDA GPU", pair)
launch("launch-existing-log-no-gpu", ["--model-path", "{d}/target", "--skip-preflight", "--timing-log", "{d}/old.jsonl"],
       "no CUDA GPU", lambda d: (pair(d), (d / "old.jsonl").write_text("{}\n")) and None)  # no note before the error
LT8 = LA + ["--draft-backend", "triton", "--draft-weights", "fp8"]
launch("launch-draft-weights-fp8-without-triton", LA + ["--draft-weights", "fp8"], "needs --draft-backend triton", pair)
launch("launch-fallback-without-triton", LA + ["--draft-backend-fallback"], "only applies with --draft-backend triton",
       pair)
launch("launch-draft-weights-int8", LA + ["--draft-weights", "int8"], "invalid choice", pair)
launch("launch-draft-weights-fp8-draft-quant", LT8 + ["--speculative-draft-model-quantization", "fp8"],
       "both quantise the drafter", pair)
launch("launch-draft-weights-fp8-target-quant", LT8 + ["--quantization", "fp8"],
       "--speculative-draft-model-quantization unquant", pair)
launch("launch-draft-weights-fp8-cpu-device", LT8 + ["--device", "cpu"], "needs a CUDA GPU", pair)


def corrupt_fixture_cache(d):
    """A cached `tiny` whose stamp is damaged: the launcher would rebuild it (the corpus checks that
    nothing changes when the run is refused for another reason first)."""
    root = d.parent / "cache" / "fixtures" / "tiny"
    (root / "target").mkdir(parents=True)
    (root / "fixture.json").write_text("{")


launch("launch-fixture-cache-corrupt-no-gpu", ["--fixture", "tiny"], "no CUDA GPU", corrupt_fixture_cache)
launch("launch-fixture-missing-no-gpu", ["--fixture", "llama3-8b", "--timing-log", "{d}/c.jsonl"], "no CUDA GPU")
launch("launch-subprocess-no-gpu", ["--model-path", "{d}/target", "--skip-preflight"], "no CUDA GPU", pair,
       runner="launch-subprocess")
for flag, value, why in (("--timing-log-max-mb", "nan", "not a finite number"),
                         ("--speculative-num-steps", "--3", "expected an integer"),
                         ("--patches", "bogus", "unknown feature"),
                         ("--timing-log", "{d}/nodir/c.jsonl", "does not exist")):
    launch(f"launch-subprocess{flag}-{value}"[:60], LA + [flag, value], why, pair, runner="launch-subprocess")

# --- plugin (SGLANG_PATCHES_CONFIG) ------------------------------------------------------------
for name, text, why in (("bool-no", '{"allow_hidden_state_mismatch": "no"}', "'allow_hidden_state_mismatch'"),
                        ("ring-big", '{"timing_ring_size": "big"}', "'timing_ring_size'"),
                        ("log-number", '{"timing_log": 42}', "'timing_log'"),
                        ("max-mb-negative", '{"timing_log_max_mb": -1}', "'timing_log_max_mb'"),
                        ("max-mb-nan", '{"timing_log_max_mb": NaN}', "'timing_log_max_mb'"),
                        ("backups-float", '{"timing_log_backups": 1.5}', "'timing_log_backups'"),
                        ("all-ranks-int", '{"timing_all_ranks": 1}', "'timing_all_ranks'"),
                        ("interval-negative", '{"timing_summary_interval": -5}', "'timing_summary_interval'"),
                        ("draft-tp-zero", '{"draft_tp_size": 0}', "'draft_tp_size'"),
                        ("backend-cuda", '{"draft_backend": "cuda"}', "'draft_backend'"),
                        ("fallback-string", '{"draft_backend_fallback": "yes"}', "'draft_backend_fallback'"),
                        ("weights-int8", '{"draft_weights": "int8"}', "'draft_weights'"),
                        ("weights-fp8-no-triton", '{"draft_weights": "fp8"}', "'draft_weights'"),
                        ("collapse-window-zero", '{"accept_collapse_window": 0}', "'accept_collapse_window'"),
                        ("collapse-threshold-text", '{"accept_collapse_threshold": "x"}', "'accept_collapse_threshold'"),
                        ("on-collapse-stop", '{"on_accept_collapse": "stop"}', "'on_accept_collapse'"),
                        ("patches-bogus", '{"patches": ["bogus"]}', "unknown feature"),
                        ("patches-string", '{"patches": "timing"}', "'patches'"),
                        ("unknown-key", '{"bogus": 1}', "unknown keys"),
                        ("not-json", "{nope", "not valid JSON"), ("list", "[]", "must be a JSON object"),
                        ("deep", DEEP, "nested too deeply")):
    case(f"plugin-{name}", "plugin", [text], 2, why)
