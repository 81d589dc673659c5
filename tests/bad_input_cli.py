"""Bad-input cases for the `sglang-patches` subcommands other than sweep (bad_input_sweep.py):
the top level, version, patches, preflight (with safetensors headers), report, fixtures, profile and
advise. Builders and the Case type: bad_input_corpus.py; run by tests/test_bad_input_corpus.py."""
from __future__ import annotations

import json
import os
import struct
from pathlib import Path

from bad_input_corpus import (DEEP, DEEP_OBJ, DRAFT, DVOCAB, H, TARGET, VOCAB, Cases, _w, log, pair,
                              pair_raw_config, pair_raw_st, rec, regular_file, row, site_with, st_bytes, sweep_dir)
from preflight_models import eagle3_tensors, make_dir

CASES = Cases()
cli = CASES.cli

# --- top level, version, patches -------------------------------------------------------------
cli("cli-unknown-subcommand", ["bogus"], "unknown subcommand")
cli("cli-unknown-subcommand-flaglike", ["--version-x"], "unknown subcommand")
cli("version-unknown-flag", ["version", "--bogus"], "unrecognized arguments")
cli("version-extra-arg", ["version", "extra"], "unrecognized arguments")
cli("version-json-value", ["version", "--json=1"], "ignored explicit argument")
cli("patches-unknown-feature", ["patches", "--patches", "bogus"], "unknown feature")
cli("patches-unknown-flag", ["patches", "--bogus"], "unrecognized arguments")
cli("patches-against-missing", ["patches", "--against-source", "{d}/nope"], "no sglang package")
cli("patches-against-file", ["patches", "--against-source", "{d}/file"], "no sglang package", regular_file)
cli("patches-against-syntax-error", ["patches", "--against-source", "{d}/site"],
    "sglang/srt/managers/scheduler.py is unreadable (syntax error",
    lambda d: site_with(d, "sglang/srt/managers/scheduler.py", "def broken(:\n"), code=1)
cli("patches-against-not-utf8", ["patches", "--against-source", "{d}/site"],
    "sglang/srt/managers/scheduler.py is unreadable (not UTF-8",
    lambda d: site_with(d, "sglang/srt/managers/scheduler.py", b"x = '\xff\xfe'\n"), code=1)
cli("patches-against-missing-value", ["patches", "--against-source"], "expected one argument")
cli("patches-contacts-against-missing", ["patches", "--contacts", "--against-source", "{d}/nope"], "no sglang package")
cli("patches-contacts-unknown-feature", ["patches", "--contacts", "--patches", "bogus"], "unknown feature")
cli("patches-contacts-value", ["patches", "--contacts=1"], "ignored explicit argument")

# --- preflight ---------------------------------------------------------------------------------
PF = ["preflight", "--model-path", "{d}/target", "--speculative-draft-model-path", "{d}/draft",
      "--speculative-algorithm", "EAGLE3"]
cli("preflight-no-args", ["preflight"], "required")
cli("preflight-missing-draft", PF[:3] + ["--tp-size", "8"], "required: --speculative-draft-model-path (ignored as "
    "SGLang (or unknown) flags preflight does not need: --tp-size)", pair)
cli("preflight-stray-word", PF + ["{d}/target"], "unrecognized arguments", pair)
cli("preflight-hub-id-not-cached", ["preflight", "--model-path", "org/not-here", "--speculative-draft-model-path",
                                    "{d}/draft"], "not in the Hugging Face cache", pair, HF_HUB_CACHE="{d}/hf")
cli("preflight-steps-not-int", PF + ["--speculative-num-steps", "abc"], "invalid int value", pair)
cli("preflight-steps-nan", PF + ["--speculative-num-steps", "nan"], "invalid int value", pair)
cli("preflight-target-missing", PF, "does not exist", lambda d: make_dir(d, "draft", DRAFT))
cli("preflight-target-is-file", PF, "is not a directory", lambda d: (pair(d), _w(d / "t2", "x")) and None)
CASES[-1].argv[2] = "{d}/t2"
cli("preflight-no-config", PF, "no config.json", lambda d: (pair(d), (d / "target" / "config.json").unlink()) and None)
cli("preflight-config-is-dir", PF, "is a directory",
    lambda d: (pair(d), (d / "target" / "config.json").unlink(), (d / "target" / "config.json").mkdir()) and None)
cli("preflight-config-not-utf8", PF, "not UTF-8", lambda d: pair_raw_config(d, "target", b"{\"a\": \"\xff\"}"))
cli("preflight-config-bad-json", PF, "not valid JSON", lambda d: pair_raw_config(d, "target", "{hidden_size: 1"))
cli("preflight-config-list", PF, "must hold a JSON object", lambda d: pair_raw_config(d, "target", "[]"))
cli("preflight-config-null", PF, "must hold a JSON object", lambda d: pair_raw_config(d, "draft", "null"))
cli("preflight-config-deep-list", PF, "nested too deeply", lambda d: pair_raw_config(d, "target", DEEP))
cli("preflight-config-deep-object", PF, "nested too deeply", lambda d: pair_raw_config(d, "draft", DEEP_OBJ))
for key, bad in (("hidden_size", "4096"), ("hidden_size", 0), ("hidden_size", -1), ("hidden_size", True),
                 ("hidden_size", 1.5), ("num_hidden_layers", None), ("vocab_size", "big")):
    cli(f"preflight-target-{key}-{bad!r}", PF, key,
        lambda d, key=key, bad=bad: pair(d, target={**TARGET, key: bad} if bad is not None else
                                         {k: v for k, v in TARGET.items() if k != key}))
cli("preflight-draft-hidden-zero", PF, "hidden_size", lambda d: pair(d, draft={**DRAFT, "hidden_size": 0}))
cli("preflight-architectures-number", PF, "architectures", lambda d: pair(d, target={**TARGET, "architectures": 7}))
cli("preflight-architectures-mixed", PF, "architectures", lambda d: pair(d, draft={**DRAFT, "architectures": ["A", 1]}))
cli("preflight-eagle-config-list", PF, "eagle_config must be an object",
    lambda d: pair(d, draft={**DRAFT, "eagle_config": []}))
cli("preflight-use-aux-string", PF, "use_aux_hidden_state",
    lambda d: pair(d, draft={**DRAFT, "eagle_config": {"use_aux_hidden_state": "no"}}))
cli("preflight-aux-ids-strings", PF, "layer ids",
    lambda d: pair(d, draft={**DRAFT, "eagle_config": {"eagle_aux_hidden_state_layer_ids": ["1"]}}))
cli("preflight-draft-tp-size-text", PF, "draft_vocab_size", lambda d: pair(d, draft={**DRAFT, "draft_vocab_size": "x"}))
# safetensors headers
cli("st-short", PF, "shorter than the 8-byte", lambda d: pair_raw_st(d, b"\x01\x02"))
cli("st-zero-length", PF, "header length field is 0", lambda d: pair_raw_st(d, struct.pack("<Q", 0)))
cli("st-huge-length", PF, "header length field", lambda d: pair_raw_st(d, struct.pack("<Q", 1 << 60) + b"{}"))
cli("st-truncated-header", PF, "truncated", lambda d: pair_raw_st(d, struct.pack("<Q", 100) + b"{}"))
cli("st-not-json", PF, "not valid UTF-8 JSON", lambda d: pair_raw_st(d, st_bytes("{nope")))
cli("st-not-utf8", PF, "not valid UTF-8 JSON", lambda d: pair_raw_st(d, struct.pack("<Q", 4) + b"\xff\xfe{}"))
cli("st-deep-list", PF, "nested too deeply", lambda d: pair_raw_st(d, st_bytes(DEEP)))
cli("st-deep-object", PF, "nested too deeply", lambda d: pair_raw_st(d, st_bytes(DEEP_OBJ)))
cli("st-list", PF, "is a list", lambda d: pair_raw_st(d, st_bytes("[]")))
cli("st-entry-not-object", PF, "is not an object", lambda d: pair_raw_st(d, st_bytes({"x": 5})))
cli("st-no-dtype", PF, "has no dtype", lambda d: pair_raw_st(d, st_bytes({"x": {"shape": [1], "data_offsets": [0, 4]}})))
cli("st-unknown-dtype", PF, "unknown dtype",
    lambda d: pair_raw_st(d, st_bytes({"x": {"dtype": "Q7", "shape": [1], "data_offsets": [0, 4]}})))
cli("st-negative-shape", PF, "has shape",
    lambda d: pair_raw_st(d, st_bytes({"x": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})))
cli("st-shape-string", PF, "has shape",
    lambda d: pair_raw_st(d, st_bytes({"x": {"dtype": "F32", "shape": "4", "data_offsets": [0, 4]}})))
cli("st-offsets-reversed", PF, "data_offsets",
    lambda d: pair_raw_st(d, st_bytes({"x": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}})))
cli("st-offsets-wrong-size", PF, "needs 8 bytes",
    lambda d: pair_raw_st(d, st_bytes({"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}) + b"\0" * 4))
cli("st-data-truncated", PF, "truncated safetensors file",
    lambda d: pair_raw_st(d, st_bytes({"x": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})))
cli("st-fc-zero-dim", PF, "'fc.weight' has shape [64, 0]",
    lambda d: pair(d, tensors={**eagle3_tensors(H, 3 * H, DVOCAB, VOCAB), "fc.weight": ("BF16", [64, 0])}))
cli("st-fc-1d", PF, "'fc.weight' has shape [64]",
    lambda d: pair(d, tensors={**eagle3_tensors(H, 3 * H, DVOCAB, VOCAB), "fc.weight": ("BF16", [64])}))
cli("st-lm-head-0d", PF, "'lm_head.weight' has shape []",
    lambda d: pair(d, tensors={**eagle3_tensors(H, 3 * H, DVOCAB, VOCAB), "lm_head.weight": ("BF16", [])}))
cli("st-d2t-2d", PF, "'d2t' has shape",
    lambda d: pair(d, tensors={**eagle3_tensors(H, 3 * H, DVOCAB, VOCAB), "d2t": ("I64", [DVOCAB, 1])}))
cli("st-index-not-json", PF, "index is not valid JSON",
    lambda d: (pair(d), _w(d / "draft" / "model.safetensors.index.json", "{x")) and None)
cli("st-index-deep", PF, "nested too deeply",
    lambda d: (pair(d), _w(d / "draft" / "model.safetensors.index.json", DEEP)) and None)
cli("st-index-no-weight-map", PF, "no weight_map",
    lambda d: (pair(d), _w(d / "draft" / "model.safetensors.index.json", {"metadata": {}})) and None)
cli("st-index-missing-shard", PF, "missing shard",
    lambda d: (pair(d), _w(d / "draft" / "model.safetensors.index.json", {"weight_map": {"fc.weight": "s2.safetensors"}})) and None)
cli("st-index-map-types", PF, "must map tensor names",
    lambda d: (pair(d), _w(d / "draft" / "model.safetensors.index.json", {"weight_map": {"fc.weight": 3}})) and None)
# pytorch_model.bin (a drafter without safetensors): parsed for shapes only, never run
def pair_bin(d: Path, raw: bytes | None = None, pkl: bytes | None = None, name: str = "pytorch_model.bin") -> None:
    """d/target + d/draft with no safetensors and a .bin: `raw` bytes, or a torch.save-shaped zip holding `pkl`."""
    import io
    import zipfile

    pair(d, tensors={})
    if pkl is not None:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as zf:
            zf.writestr("archive/data.pkl", pkl)
        raw = buf.getvalue()
    _w(d / "draft" / name, raw)


# GLOBAL posix.system (os.system), then REDUCE on ("touch pwned",): a trap that would create d/pwned
TRAP = b"\x80\x02cposix\nsystem\nX\x0b\x00\x00\x00touch pwned\x85R."
cli("bin-pickle-runs-code", PF, "its pickle references posix.system, refusing to load it (never executed)",
    lambda d: pair_bin(d, pkl=TRAP))
cli("bin-pickle-eval", PF, "its pickle references builtins.eval",
    lambda d: pair_bin(d, pkl=b"\x80\x04\x8c\x08builtins\x8c\x04eval\x93X\x03\x00\x00\x001+1\x85R."))
cli("bin-empty", PF, "not a PyTorch checkpoint", lambda d: pair_bin(d, b""))
cli("bin-html", PF, "not a PyTorch checkpoint", lambda d: pair_bin(d, b"<html>429</html>"))
cli("bin-zip-no-pickle", PF, "0 data.pkl entries", lambda d: pair_bin(d, pkl=None, raw=b"PK\x05\x06" + b"\x00" * 18))
cli("bin-pickle-garbage", PF, "not a readable state dict", lambda d: pair_bin(d, pkl=b"\x80\x02garbage"))
cli("bin-pickle-list", PF, "holds a list, not a state dict", lambda d: pair_bin(d, pkl=b"\x80\x02]."))
cli("bin-index-missing-shard", PF, "missing shard",
    lambda d: (pair_bin(d, pkl=b"\x80\x02}."), _w(d / "draft" / "pytorch_model.bin.index.json",
                                                  {"weight_map": {"fc.weight": "pytorch_model-2.bin"}})) and None)
# findings (exit 1): the pair is readable but would silently accept nothing
cli("preflight-finding-eagle-algorithm", PF[:-1] + ["EAGLE"], "SP00", pair, code=1)
cli("preflight-finding-fc-width", PF, "SP00",
    lambda d: pair(d, tensors=eagle3_tensors(H, 2 * H, DVOCAB, VOCAB)), code=1)

# --- report ------------------------------------------------------------------------------------
RP = ["report", "{d}/log.jsonl"]
cli("report-no-files", ["report"], "required")
cli("report-missing-file", RP, "no such file")
cli("report-directory", ["report", "{d}"], "is a directory")
cli("report-device", ["report", "/dev/zero"], "not a regular file")
cli("report-fifo", ["report", "{d}/fifo"], "not a regular file", lambda d: os.mkfifo(d / "fifo"))
cli("report-empty", RP, "file is empty", lambda d: _w(d / "log.jsonl", ""))
cli("report-blank-lines", RP, "file is empty", lambda d: _w(d / "log.jsonl", "\n\n  \n"))
cli("report-not-json", RP, "not valid JSON", lambda d: log(d, "nope", "{"))
cli("report-not-utf8", RP, "not valid JSON", lambda d: _w(d / "log.jsonl", b"\xff\xfe\xfd\n"))
cli("report-deep-line", RP, "nested too deeply", lambda d: log(d, DEEP))
cli("report-other-version", RP, "schema version", lambda d: log(d, rec(v=99)))
cli("report-not-object", RP, "not a JSON object", lambda d: log(d, "[1, 2]"))
for fld, bad, why in (
        ("bs", -1, "'bs' is -1"), ("bs", "4", "has type str"), ("bs", 10 ** 9, "outside"),
        ("cycle", -5, "'cycle' is -5"), ("rank", -1, "'rank' is -1"), ("rank", 1.5, "has type float"),
        ("steps", 10 ** 12, "'steps' is"), ("topk", -2, "'topk' is -2"), ("draft_tokens", "4", "has type str"),
        ("accepted", [10 ** 12], "accepted must be"), ("accepted", [-1], "accepted must be"),
        ("accepted", "3", "has type str"), ("accepted", [1, 1, 1], "accepted lists 3 requests"),
        ("accepted", [True], "accepted must be"), ("kind", "verify", "kind 'verify'"),
        ("draft_ms", "NaN", "'draft_ms' is nan"), ("verify_ms", "Infinity", "'verify_ms' is inf"),
        ("cycle_ms", -3.0, "'cycle_ms' is -3.0"), ("host_gap_ms", -0.1, "'host_gap_ms' is -0.1"),
        ("extend_ms", "1.0", "has type str"), ("gpu_gap_ms", "fast", "'gpu_gap_ms' has type str"),
        ("gpu_gap_ms", "-Infinity", "'gpu_gap_ms' is -inf"), ("stale", -1, "'stale' is -1"),
        ("stale", "0", "'stale' has type str"), ("simulated", "yes", "'simulated' has type str"),
        ("simulated", 1, "'simulated' has type int"), ("t", "NaN", "'t' is nan"), ("t", -1, "'t' is -1")):
    raw = json.dumps(rec(**{fld: bad}))
    if bad in ("NaN", "Infinity", "-Infinity"):  # JSON extensions Python reads as floats
        raw = raw.replace(f'"{bad}"', bad)
    cli(f"report-field-{fld}-{bad!r}"[:60], RP, why, lambda d, raw=raw: log(d, raw, raw))
cli("report-missing-field", RP, "missing field 'bs'", lambda d: log(d, {k: v for k, v in rec().items() if k != "bs"}))
cli("report-png-is-input", RP + ["--png", "{d}/log.jsonl"], "is also the input", lambda d: log(d, rec()))
cli("report-png-is-second-input", RP + ["{d}/log2.jsonl", "--png", "{d}/log2.jsonl"], "is also the input",
    lambda d: (log(d, rec()), log(d, rec(rank=1), name="log2.jsonl")) and None)
cli("report-png-symlink-to-input", RP + ["--png", "{d}/link.png"], "is also the input",
    lambda d: (log(d, rec()), (d / "link.png").symlink_to(d / "log.jsonl")) and None)
cli("report-png-is-dir", RP + ["--png", "{d}"], "is a directory", lambda d: log(d, rec()))
cli("report-png-missing-dir", RP + ["--png", "{d}/no/x.png"], "does not exist", lambda d: log(d, rec()))
cli("report-png-below-file", RP + ["--png", "{d}/file/x.png"], "does not exist",
    lambda d: (log(d, rec()), regular_file(d)) and None)
cli("report-png-exists", RP + ["--png", "{d}/old.png"], "already exists; pass --force",
    lambda d: (log(d, rec()), (d / "old.png").write_bytes(b"kept")) and None)
cli("report-png-not-png", RP + ["--png", "{d}/cfg.json"], "give a name ending in .png",
    lambda d: (log(d, rec()), (d / "cfg.json").write_text("{}")) and None)
cli("report-force-without-png", RP + ["--force"], "--force only applies to --png", lambda d: log(d, rec()))
cli("report-rank-absent", RP + ["--rank", "3"], "no records for that rank", lambda d: log(d, rec()))
cli("report-rank-text", RP + ["--rank", "x"], "invalid int value", lambda d: log(d, rec()))
cli("report-ring-zero", RP + ["--ring", "0"], "--ring must be at least 1", lambda d: log(d, rec()))
cli("report-kind-bogus", RP + ["--kind", "verify"], "invalid choice", lambda d: log(d, rec()))
cli("report-only-prefill", RP, "no decode cycles", lambda d: log(d, rec(kind="prefill", accepted=[])))
cli("report-unknown-flag", RP + ["--bogus"], "unrecognized arguments", lambda d: log(d, rec()))

# --- fixtures ----------------------------------------------------------------------------------
FX = ["fixtures", "build", "tiny", "--out"]
cli("fixtures-unknown-sub", ["fixtures", "bogus"], "invalid choice")
cli("fixtures-build-no-name", ["fixtures", "build", "--out", "{d}/o"], "required")
cli("fixtures-build-no-out", ["fixtures", "build", "tiny"], "required")
cli("fixtures-unknown-fixture", ["fixtures", "build", "nope", "--out", "{d}/o"], "unknown fixture")
cli("fixtures-out-is-file", FX + ["{d}/file"], "not a directory", regular_file)
cli("fixtures-out-below-file", FX + ["{d}/file/sub"], "not a directory", regular_file)
cli("fixtures-out-under-proc", FX + ["/proc/sglang_patches_fx"], "under /proc")
cli("fixtures-out-not-empty", FX + ["{d}/o"], "is not empty", lambda d: _w(d / "o" / "keep.txt", "mine"))
cli("fixtures-max-seconds-nan", FX + ["{d}/o", "--max-seconds", "nan"], "not a finite number")
cli("fixtures-max-seconds-zero", FX + ["{d}/o", "--max-seconds", "0"], "must be positive")
cli("fixtures-max-seconds-text", FX + ["{d}/o", "--max-seconds", "soon"], "invalid number")
cli("fixtures-seed-text", FX + ["{d}/o", "--seed", "x"], "invalid int value")
cli("fixtures-seed-untrained", FX + ["{d}/o", "--seed", "3"], "is not trained")
cli("fixtures-max-seconds-untrained", FX + ["{d}/o", "--max-seconds", "60"], "is not trained")
cli("fixtures-cache-under-proc", FX + ["{d}/o"], "under /proc", SGLANG_PATCHES_CACHE="/proc/sglang_patches_cache")
cli("fixtures-cache-below-file", FX + ["{d}/o"], "not a directory", regular_file,
    SGLANG_PATCHES_CACHE="{d}/file/cache")

# --- profile -----------------------------------------------------------------------------------
PR = ["profile", "--url", "http://127.0.0.1:1", "--out", "{d}/prof", "--no-py-spy", "--no-torch-profiler"]
cli("profile-no-url", ["profile", "--out", "{d}/prof"], "required")
cli("profile-no-out", ["profile", "--url", "http://x"], "required")
for value, why in (("nan", "not a finite number"), ("inf", "not a finite number"), ("0", "must be > 0"),
                   ("-1", "must be > 0"), ("1e9", "at most 86400"), ("soon", "invalid number")):
    cli(f"profile-seconds-{value}", PR + ["--seconds", value], why)
for url, why in (("http://[::1", "not a valid URL"), ("ftp://host", "not an http(s) URL"), ("http://", "not an http(s) URL"),
                 ("http://h:99999", "out of range"), ("http://a b", "whitespace"), ("http://h:port", "--url")):
    cli(f"profile-url-{url}"[:40], ["profile", "--url", url, "--out", "{d}/prof", "--no-py-spy"], why)
cli("profile-rate-zero", PR + ["--rate", "0"], "--rate must be between")
cli("profile-top-zero", PR + ["--top", "0"], "--top 0")
cli("profile-activities-bogus", PR + ["--activities", "CPU,TPU"], "unknown TPU")
cli("profile-out-not-empty", PR, "not an empty directory", lambda d: _w(d / "prof" / "keep", "x"))
cli("profile-out-is-file", ["profile", "--url", "http://127.0.0.1:1", "--out", "{d}/file", "--no-py-spy"],
    "not a directory", regular_file)
cli("profile-out-below-file", ["profile", "--url", "http://127.0.0.1:1", "--out", "{d}/file/p", "--no-py-spy"],
    "not a directory", regular_file)
cli("profile-out-under-proc", ["profile", "--url", "http://127.0.0.1:1", "--out", "/proc/sgp_prof", "--no-py-spy"],
    "under /proc")
cli("profile-unreachable", PR, "cannot reach")

# --- advise ------------------------------------------------------------------------------
AD = ["advise", "{d}/log.jsonl"]


def good_log(d: Path) -> None:
    log(d, *(rec(cycle=i, t=1764400000.0 + i) for i in range(8)))


cli("advise-no-files", ["advise"], "required")
cli("advise-missing-file", AD, "no such file")
cli("advise-bad-log", AD, "no valid timing records", lambda d: log(d, rec(bs=-1)))
cli("advise-json-document", AD, "one JSON document (an adaptive config, a summary?), not a timing log",
    lambda d: _w(d / "log.jsonl", json.dumps({"1": {"candidate_steps": [5]}}, indent=2)))
for flag, value, why in (("--steps", "0", "0 is outside 1-64; give a comma list of integers from 1 to 64"),
                         ("--steps", "1,1000000000", "1000000000 is outside 1-64; give"),
                         ("--steps", "a", "integers from 1 to 64"), ("--max-steps", "0", "from 1 to 64"),
                         ("--max-steps", "1000000000", "from 1 to 64"), ("--baseline-step-ms", "nan", "not a finite number"),
                         ("--baseline-step-ms", "0", "positive number"), ("--calibration-tolerance", "1", "must be > 1"),
                         ("--calibration-tolerance", "inf", "not a finite number"), ("--rank", "7", "no records for that rank"),
                         ("--calibration", "{d}/nope", "not a directory"), ("--calibration", "{d}", "no results.jsonl"),
                         ("--baseline-log", "{d}/nope.log", "nope.log: no such file; pass the log (stdout/stderr) "
                                                            "of an SGLang server run without"),
                         ("--baseline-log", "{d}/log.jsonl", "that is a speculative server's timing log (--timing-log JSONL), the LOG"),
                         ("--verify-cost", "{d}/nope.json,{d}/log.jsonl", "nope.json: no such file"),
                         ("--verify-cost", "{d}/a.json,", "an empty file name in the list"),
                         ("--verify-cost", "{d}/a.json:fx,{d}/b.json", "the fixture goes after the last file")):
    cli(f"advise{flag}-{value}"[:60], AD + [flag, value], why, good_log)
cli("advise-same-log-twice", AD + ["{d}/log.jsonl"], "given twice (also as", good_log)
cli("advise-same-log-twice-by-link", AD + ["{d}/link.jsonl"], "given twice (also as",
    lambda d: (good_log(d), os.symlink(d / "log.jsonl", d / "link.jsonl")) and None)
cli("report-same-log-twice", ["report", "{d}/log.jsonl", "{d}/log.jsonl"], "given twice", good_log)
cli("report-prefill-only-log", ["report", "{d}/log.jsonl"], "its records are prefills only (3 prefill)",
    lambda d: log(d, *(rec(cycle=i, t=1764400000.0 + i, kind="prefill", accepted=[]) for i in range(3))))
cli("report-copied-log", ["report", "{d}/log.jsonl", "{d}/copy.jsonl"], "copy.jsonl: holds the same rank-0 records as",
    lambda d: (good_log(d), _w(d / "copy.jsonl", (d / "log.jsonl").read_text())) and None)
cli("advise-copied-log", AD + ["{d}/copy.jsonl"], "holds the same rank-0 records as",
    lambda d: (good_log(d), _w(d / "copy.jsonl", (d / "log.jsonl").read_text())) and None)
cli("advise-two-baselines", AD + ["--baseline-step-ms", "5", "--baseline-log", "{d}/x.log"], "not allowed with", good_log)
cli("advise-calibration-bad-row", AD + ["--calibration", "{d}/g"], "results.jsonl:2",
    lambda d: (good_log(d), sweep_dir(d, "g", [json.dumps(row()), json.dumps(row(bs="8"))])) and None)
# advise LOG --adaptive-config OUT.json [--force]: refused before anything is read or written
ADC = AD + ["--adaptive-config", "{d}/a.json"]
cli("advise-adaptive-config-exists", ADC, "already exists; pass --force",
    lambda d: (good_log(d), _w(d / "a.json", "keep")) and None)
cli("advise-adaptive-config-is-the-log", AD + ["--adaptive-config", "{d}/log.jsonl", "--force"], "that is an input",
    good_log)
cli("advise-adaptive-config-is-the-baseline-log",
    AD + ["--baseline-log", "{d}/server.log", "--adaptive-config", "{d}/server.log", "--force"], "that is an input",
    lambda d: (good_log(d), _w(d / "server.log", "no decode lines\n")) and None)
cli("advise-adaptive-config-dir-missing", AD + ["--adaptive-config", "{d}/no/a.json"], "does not exist", good_log)
cli("advise-adaptive-config-is-a-dir", AD + ["--adaptive-config", "{d}"], "is a directory", good_log)
cli("advise-adaptive-config-empty-log", ADC, "file is empty", lambda d: _w(d / "log.jsonl", ""))
cli("advise-adaptive-config-garbage-log", ADC, "no valid timing records",
    lambda d: _w(d / "log.jsonl", b"\x00\xffgarbage\n{{{\n"))
# files of another kind where a timing log is wanted (report, advise, advise --adaptive-config) or a server
# log (--baseline-log): named for what they look like, with the file wanted instead (vocab/file_kind.py)
OTHER_FILES = {
    "chat": ('{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 256}\n' * 3,
             'a chat-request JSONL ({"messages": [...]} lines)'),
    "sharegpt": ('{"conversations": [{"from": "human", "value": "Hi"}]}\n',
                 'a chat-request JSONL ({"conversations": [...]} lines)'),
    "prompts": ('{"prompt": "Once upon a time", "max_tokens": 64}\n', 'a chat-request JSONL ({"prompt": ...} lines)'),
    "response": ('{"id": "x", "object": "chat.completion", "choices": [{"index": 0}]}\n',
                 'an OpenAI API response JSONL ({"choices": [...]} lines)'),
    # one line of `python -m sglang.bench_serving --output-file` (SGLang's benchmark/serving.py result dict)
    "bench": (json.dumps({"tag": None, "backend": "sglang", "dataset_name": "random", "request_rate": "inf",
                          "max_concurrency": 1, "duration": 12.5, "completed": 64, "total_input_tokens": 65536,
                          "request_throughput": 5.1, "output_throughput": 652.3, "median_tpot_ms": 1.5,
                          "accept_length": 2.4}) + "\n", "SGLang bench_serving results (its --output-file JSONL)"),
    "document": (json.dumps({"1": {"candidate_steps": [5]}}, indent=2), "one JSON document (an adaptive config, a summary?)"),
    "records": ('{"step": 1, "loss": 2.5}\n', "a JSONL of other records (keys step, loss)"),
}
for kind, (text, label) in OTHER_FILES.items():
    for name, argv in (("report", RP), ("advise", AD), ("advise-adaptive-config", ADC)):
        cli(f"{name}-given-{kind}", argv, f"log.jsonl: looks like {label}",
            lambda d, text=text: _w(d / "log.jsonl", text))
    cli(f"advise-baseline-log-given-{kind}", AD + ["--baseline-log", "{d}/other.jsonl"],
        f"other.jsonl: looks like {label}, not a SGLang server's log: pass the stdout/stderr log of a SGLang server",
        lambda d, text=text: (good_log(d), _w(d / "other.jsonl", text)) and None)
for name, argv in (("report", RP), ("advise", AD), ("advise-adaptive-config", ADC)):
    cli(f"{name}-given-cut-gzip", argv, "log.jsonl: the compressed log is damaged or cut short",
        lambda d: _w(d / "log.jsonl", __import__("gzip").compress(b'{"schema": "x"}\n' * 50)[:20]))
    cli(f"{name}-given-cut-xz", argv, "log.jsonl: the compressed log is damaged or cut short",
        lambda d: _w(d / "log.jsonl", __import__("lzma").compress(b'{"schema": "x"}\n' * 50)[:40]))
cli("advise-baseline-log-given-gzip", AD + ["--baseline-log", "{d}/server.log"],
    "server.log is gzip-compressed: gunzip it first",
    lambda d: (good_log(d), _w(d / "server.log", __import__("gzip").compress(b"Decode batch\n"))) and None)
cli("report-given-server-log", RP, "looks like a SGLang server's log, not a timing log: pass the file written by "
    "`--timing-log`; a server log without speculation is what --baseline-log takes",
    lambda d: _w(d / "log.jsonl", "[2026-12-02 15:34:12] server_args=ServerArgs(model_path='/m')\n"
                 + "[2026-12-02 15:35:53] Decode batch, #running-req: 1, gen throughput (token/s): 207.20\n" * 4))
