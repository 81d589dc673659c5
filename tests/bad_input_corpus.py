"""The bad-input corpus: every case is generated here at test time (no input file is committed).

A case is (name, how it runs, argv with `{d}` standing for the case's own directory, a setup that
writes its inputs into that directory, the exit code, and a substring the one error line must
contain). `tests/test_bad_input_corpus.py` runs each one and checks the exit code, the one line, no
traceback, a time limit, and that nothing in the case directory changed (every input byte-identical,
no output file or directory created, not even half-written).

Runners:
  cli     sglang_patches.cli.main(argv) in-process (the `sglang-patches` console script)
  launch  sglang_patches.launch.main(argv) in-process (pre-spawn checks; no GPU here)
  launch-subprocess   `python -m sglang_patches.launch ...` in a child process
  plugin  sglang_patches.plugin.load() with SGLANG_PATCHES_ENABLE=1 and SGLANG_PATCHES_CONFIG=argv[0]
"""
from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from preflight_models import eagle3_cfg, eagle3_tensors, make_dir, target_cfg, write_st

# ---------------------------------------------------------------- input builders


def _w(path: Path, data) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


DEEP = "[" * 200_000 + "]" * 200_000            # RecursionError in a naive json.loads
DEEP_OBJ = '{"a":' * 200_000 + "1" + "}" * 200_000
H, VOCAB, DVOCAB = 64, 256, 128
TARGET = target_cfg("LlamaForCausalLM", H, 8, VOCAB)
DRAFT = eagle3_cfg(H, VOCAB, DVOCAB)


def pair(d: Path, target=None, draft=None, tensors=None) -> None:
    """d/target + d/draft: a compatible Llama + EAGLE-3 pair unless parts are replaced."""
    make_dir(d, "target", TARGET if target is None else target)
    make_dir(d, "draft", DRAFT if draft is None else draft,
             eagle3_tensors(H, 3 * H, DVOCAB, VOCAB) if tensors is None else tensors)


def pair_raw_config(d: Path, which: str, raw) -> None:
    pair(d)
    _w(d / which / "config.json", raw)


def pair_raw_st(d: Path, raw: bytes) -> None:
    pair(d)
    _w(d / "draft" / "model.safetensors", raw)


def st_bytes(header) -> bytes:
    raw = (header if isinstance(header, str) else json.dumps(header)).encode()
    return struct.pack("<Q", len(raw)) + raw


def rec(**over) -> dict:
    r = {"schema": "sglang_patches.spec_timing", "v": 1, "cycle": 0, "t": 1764400000.0, "rank": 0,
         "kind": "decode", "bs": 2, "steps": 3, "topk": 1, "draft_tokens": 4, "accepted": [3, 1],
         "draft_ms": 1.0, "verify_ms": 2.0, "extend_ms": 0.5, "cycle_ms": 3.6, "host_gap_ms": 0.2,
         "gpu_gap_ms": 0.05, "stale": 0}
    r.update(over)
    return r


def log(d: Path, *lines, name="log.jsonl") -> None:
    _w(d / name, "".join((ln if isinstance(ln, str) else json.dumps(ln)) + "\n" for ln in lines))


def row(config="baseline", bs=1, **over) -> dict:
    spec = None if config == "baseline" else {"steps": 1, "topk": 1, "draft_tokens": 2}
    r = {"schema": 1, "config": config, "batch_size": bs, "status": "ok", "tok_s": 100.0, "spec": spec,
         "tok_s_per_request": 50.0, "accept_length": None if spec is None else 1.5, "reason": None,
         "phases_p50_ms": None if spec is None else {"draft": 1.0, "verify": 2.0, "extend": 0.5, "cycle": 3.5},
         "phase_shares": None, "pos_rates": None, "cond_rates": None, "tok_s_repeats": [100.0],
         "command": "sglang-patches sweep ...", "date": "2026-11-29T00:00:00+00:00"}
    r.update(over)
    return r


MANIFEST = {"target": "t", "draft": "d", "algorithm": "EAGLE3", "load_format": None, "max_new_tokens": 256,
            "prompts_sha256": "x", "simulate_acc_len": None, "extra_server_args": [], "env": {},
            "ignore_eos": True, "batch_sizes": [1]}


def sweep_dir(d: Path, name: str, rows, manifest=MANIFEST, plan=None, search=None) -> None:
    s = d / name
    s.mkdir(parents=True, exist_ok=True)
    if manifest is not None:
        _w(s / "sweep.json", manifest)
    if rows is not None:
        _w(s / "results.jsonl", "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    if plan is not None:
        _w(s / "plan.json", plan)
    if search is not None:
        _w(s / "search.json", search)


GOOD_ROWS = [row(), row("s1_k1_n2")]


def models_only(d: Path) -> None:
    make_dir(d, "target", TARGET)
    make_dir(d, "draft", DRAFT)


def site_with(d: Path, rel: str, data) -> None:
    """A fake site-packages for `patches --against-source`: sglang/ with one module file."""
    _w(d / "site" / "sglang" / "__init__.py", "")
    _w(d / "site" / rel, data)


def regular_file(d: Path) -> None:
    _w(d / "file", "x")


# ---------------------------------------------------------------- cases


@dataclass
class Case:
    name: str
    runner: str                      # cli | launch | launch-subprocess | plugin
    argv: list[str]
    code: int                        # 2 unusable input, 1 findings
    expect: str                      # substring of the error line (case-insensitive)
    setup: Callable[[Path], None] | None = None
    env: dict = field(default_factory=dict)


CASES: list[Case] = []


def case(name, runner, argv, code, expect, setup=None, **env):
    CASES.append(Case(name, runner, list(argv), code, expect, setup, dict(env)))


def cli(name, argv, expect, setup=None, code=2, **env):
    case(name, "cli", argv, code, expect, setup, **env)


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
cli("preflight-missing-algorithm", PF[:5], "--speculative-algorithm", pair)
cli("preflight-unknown-flag", PF + ["--bogus"], "unrecognized arguments", pair)
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
cli("fixtures-cache-under-proc", FX + ["{d}/o"], "under /proc", SGLANG_PATCHES_CACHE="/proc/sglang_patches_cache")
cli("fixtures-cache-below-file", FX + ["{d}/o"], "not a directory", regular_file,
    SGLANG_PATCHES_CACHE="{d}/file/cache")

# --- sweep -------------------------------------------------------------------------------------
SW = ["sweep", "--model-path", "{d}/target", "--speculative-draft-model-path", "{d}/draft"]
cli("sweep-no-out", ["sweep"], "--out DIR is required")
cli("sweep-unknown-flag", ["sweep", "--bogus"], "unrecognized arguments")
cli("sweep-replay-out-same-force", ["sweep", "--search", "--replay", "{d}/g", "--out", "{d}/g", "--force"],
    "is also the input --replay", lambda d: sweep_dir(d, "g", GOOD_ROWS, plan={"configs": []}))
cli("sweep-replay-out-same-slash", ["sweep", "--search", "--replay", "{d}/g", "--out", "{d}/g/", "--force"],
    "is also the input --replay", lambda d: sweep_dir(d, "g", GOOD_ROWS))
cli("sweep-merge-out-same", ["sweep", "--merge", "{d}/a", "{d}/b", "--out", "{d}/b", "--force"],
    "is also the input --merge", lambda d: (sweep_dir(d, "a", GOOD_ROWS), sweep_dir(d, "b", GOOD_ROWS)) and None)
cli("sweep-prompts-is-out", SW + ["--prompts", "{d}/p.txt", "--out", "{d}/p.txt"], "is also the input --prompts",
    lambda d: (models_only(d), _w(d / "p.txt", "hello\n")) and None)
cli("sweep-out-is-model", SW + ["--out", "{d}/target"], "is also the input --model-path", models_only)
cli("sweep-replay-needs-search", ["sweep", "--replay", "{d}/g", "--out", "{d}/o"], "needs --search",
    lambda d: sweep_dir(d, "g", GOOD_ROWS))
cli("sweep-replay-missing", ["sweep", "--search", "--replay", "{d}/g", "--out", "{d}/o"], "no such directory")
cli("sweep-replay-no-manifest", ["sweep", "--search", "--replay", "{d}/g", "--out", "{d}/o"], "sweep.json missing",
    lambda d: sweep_dir(d, "g", GOOD_ROWS, manifest=None))
cli("sweep-replay-null-manifest", ["sweep", "--search", "--replay", "{d}/g", "--out", "{d}/o"],
    "not a sweep manifest", lambda d: sweep_dir(d, "g", GOOD_ROWS, manifest="null"))
cli("sweep-replay-results-dir", ["sweep", "--search", "--replay", "{d}/g", "--out", "{d}/o"], "is not a file",
    lambda d: (sweep_dir(d, "g", None), (d / "g" / "results.jsonl").mkdir()) and None)
cli("sweep-replay-no-rows", ["sweep", "--search", "--replay", "{d}/g", "--out", "{d}/o"], "no rows",
    lambda d: sweep_dir(d, "g", []))
BAD_ROWS = {
    "batch-size-string": row(bs="8"), "batch-size-zero": row(bs=0), "batch-size-bool": row(bs=True),
    "ok-without-tok-s": {k: v for k, v in row().items() if k != "tok_s"}, "tok-s-nan": row(tok_s="NaN"),
    "tok-s-negative": row(tok_s=-5.0), "tok-s-string": row(tok_s="fast"), "status-bogus": row(status="done"),
    "config-missing": {k: v for k, v in row().items() if k != "config"}, "config-number": row(config=5),
    "spec-list": row("s1_k1_n2", spec=[1, 1, 2]), "spec-zero-steps": row("s1_k1_n2", spec={"steps": 0, "topk": 1, "draft_tokens": 2}),
    "spec-missing-on-config": row("s1_k1_n2", spec=None), "baseline-with-spec": row(spec={"steps": 1, "topk": 1, "draft_tokens": 2}),
    "phases-string": row("s1_k1_n2", phases_p50_ms={"draft": "1"}), "pos-rates-dict": row("s1_k1_n2", pos_rates={"a": 1}),
    "repeats-nan": row(tok_s_repeats=["NaN"]), "accept-length-string": row("s1_k1_n2", accept_length="1.5"),
    "reason-number": row(status="failed", reason=3), "row-is-list": [1, 2], "row-is-null": None,
}


def _row_text(r) -> str:
    t = json.dumps(r)
    return t.replace('"NaN"', "NaN")


for bad_name, bad_row in BAD_ROWS.items():
    rows = [json.dumps(row()), _row_text(bad_row)]
    cli(f"sweep-replay-row-{bad_name}", ["sweep", "--search", "--replay", "{d}/g", "--out", "{d}/o"], "results.jsonl:2",
        lambda d, rows=rows: sweep_dir(d, "g", rows))
for bad_name in ("batch-size-string", "ok-without-tok-s", "row-is-null", "tok-s-nan", "spec-list"):
    rows = [json.dumps(row()), _row_text(BAD_ROWS[bad_name])]
    cli(f"sweep-report-only-row-{bad_name}", ["sweep", "--report-only", "--out", "{d}/g"], "results.jsonl:2",
        lambda d, rows=rows: sweep_dir(d, "g", rows))
    cli(f"sweep-merge-row-{bad_name}", ["sweep", "--merge", "{d}/a", "{d}/b", "--out", "{d}/o"], "results.jsonl:2",
        lambda d, rows=rows: (sweep_dir(d, "a", GOOD_ROWS), sweep_dir(d, "b", rows)) and None)
    cli(f"sweep-resume-row-{bad_name}", SW + ["--resume", "--out", "{d}/g"], "results.jsonl:2",
        lambda d, rows=rows: (models_only(d), sweep_dir(d, "g", rows, manifest={"batch_sizes": [1]})) and None)
cli("sweep-report-only-missing", ["sweep", "--report-only", "--out", "{d}/g"], "missing or holds no rows")
cli("sweep-report-only-results-dir", ["sweep", "--report-only", "--out", "{d}/g"], "is not a file",
    lambda d: (sweep_dir(d, "g", None), (d / "g" / "results.jsonl").mkdir()) and None)
cli("sweep-report-only-plan-list", ["sweep", "--report-only", "--out", "{d}/g"], "plan.json is not a sweep plan",
    lambda d: sweep_dir(d, "g", GOOD_ROWS, plan=[1]))
cli("sweep-report-only-search-garbage", ["sweep", "--report-only", "--out", "{d}/g"], "unexpected content",
    lambda d: sweep_dir(d, "g", GOOD_ROWS, search={"compare": [{"config": "x"}]}))
cli("sweep-report-only-plan-skipped-bad", ["sweep", "--report-only", "--out", "{d}/g"], "unexpected content",
    lambda d: sweep_dir(d, "g", GOOD_ROWS, plan={"skipped": [5]}))
cli("sweep-merge-one-dir", ["sweep", "--merge", "{d}/a", "--out", "{d}/o"], "at least two",
    lambda d: sweep_dir(d, "a", GOOD_ROWS))
cli("sweep-merge-missing-dir", ["sweep", "--merge", "{d}/a", "{d}/nope", "--out", "{d}/o"], "no such directory",
    lambda d: sweep_dir(d, "a", GOOD_ROWS))
cli("sweep-merge-null-manifest", ["sweep", "--merge", "{d}/a", "{d}/b", "--out", "{d}/o"], "not a sweep manifest",
    lambda d: (sweep_dir(d, "a", GOOD_ROWS), sweep_dir(d, "b", GOOD_ROWS, manifest="null")) and None)
cli("sweep-merge-manifest-batch-sizes", ["sweep", "--merge", "{d}/a", "{d}/b", "--out", "{d}/o"], "batch_sizes",
    lambda d: (sweep_dir(d, "a", GOOD_ROWS), sweep_dir(d, "b", GOOD_ROWS, manifest={**MANIFEST, "batch_sizes": "1"})) and None)
cli("sweep-merge-other-settings", ["sweep", "--merge", "{d}/a", "{d}/b", "--out", "{d}/o"], "other settings",
    lambda d: (sweep_dir(d, "a", GOOD_ROWS), sweep_dir(d, "b", GOOD_ROWS, manifest={**MANIFEST, "target": "u"})) and None)
cli("sweep-merge-plan-list", ["sweep", "--merge", "{d}/a", "{d}/b", "--out", "{d}/o"], "not a sweep plan",
    lambda d: (sweep_dir(d, "a", GOOD_ROWS, plan=[]), sweep_dir(d, "b", GOOD_ROWS)) and None)
cli("sweep-resume-null-manifest", SW + ["--resume", "--out", "{d}/g"], "not a sweep manifest",
    lambda d: (models_only(d), sweep_dir(d, "g", GOOD_ROWS, manifest="null")) and None)
cli("sweep-resume-other-settings", SW + ["--resume", "--out", "{d}/g"], "other settings",
    lambda d: (models_only(d), sweep_dir(d, "g", GOOD_ROWS, manifest={"max_new_tokens": 1})) and None)
cli("sweep-exists-without-resume", SW + ["--out", "{d}/g"], "already holds a sweep",
    lambda d: (models_only(d), sweep_dir(d, "g", GOOD_ROWS)) and None)
cli("sweep-resume-and-force", SW + ["--out", "{d}/g", "--resume", "--force"], "contradict",
    lambda d: (models_only(d), sweep_dir(d, "g", GOOD_ROWS)) and None)
cli("sweep-out-is-file", SW + ["--out", "{d}/file"], "is not a directory",
    lambda d: (models_only(d), regular_file(d)) and None)
cli("sweep-results-is-dir", SW + ["--out", "{d}/g"], "is not a file",
    lambda d: (models_only(d), (d / "g" / "results.jsonl").mkdir(parents=True)) and None)
for flag, value, why in (("--shard", "1/0", "expected I/N"), ("--shard", "a/b", "expected I/N"),
                         ("--shard", "3/2", "expected I/N"), ("--steps", "a", "is not an integer"),
                         ("--steps", "0", "below 1"), ("--topk", "-1", "below 1"), ("--batch-sizes", ",", "is empty"),
                         ("--draft-tokens", "1e3", "is not an integer"), ("--max-new-tokens", "0", "at least 1"),
                         ("--repeats", "0", "at least 1"), ("--requests-per-batch", "-2", "at least 1"),
                         ("--search-top", "0", "at least 1"), ("--search-budget", "0", "at least 1"),
                         ("--timeout-per-config", "nan", "not a finite number"),
                         ("--timeout-per-config", "inf", "not a finite number"),
                         ("--timeout-per-config", "0", "must be > 0"),
                         ("--simulate-acc-len", "nan", "not a finite number"), ("--simulate-acc-len", "-1", "must be > 0"),
                         ("--profile-seconds", "-1", "must be >= 0"), ("--profile-seconds", "NaN", "not a finite number"),
                         ("--env", "NOEQUALS", "expected KEY=VALUE"), ("--env", "=v", "expected KEY=VALUE"),
                         ("--extra-server-args", "--port 1", "must not contain --port"),
                         ("--extra-server-args", "'unterminated", "quote it"),
                         ("--prompts", "{d}/nope.txt", "no such file"),
                         ("--prompts", "{d}", "not a regular file")):
    cli(f"sweep-flag{flag}-{value}"[:60], SW + [flag, value, "--out", "{d}/o"], why, models_only)
cli("sweep-fixture-unknown", ["sweep", "--fixture", "nope", "--out", "{d}/o"], "unknown fixture")
cli("sweep-fixture-and-model", SW + ["--fixture", "tiny", "--out", "{d}/o"], "not both", models_only)
cli("sweep-model-missing", SW + ["--out", "{d}/o"], "no such directory")
cli("sweep-model-no-config", SW + ["--out", "{d}/o"], "has no config.json",
    lambda d: ((d / "target").mkdir(), (d / "draft").mkdir()) and None)
for pname, pdata, why in (("binary", b"a\x00b\n", "looks binary"), ("not-utf8", b"\xff\xfe prompt\n", "not UTF-8"),
                          ("bad-json-line", '{"prompt": "a"}\n{nope\n', "line 2 is not valid JSON"),
                          ("deep-json-line", '{"prompt": "a"}\n' + DEEP + "\n", "nested too deeply"),
                          ("no-prompt-field", '{"x": 1}\n', "no string"), ("empty", "\n\n", "holds no prompts")):
    cli(f"sweep-prompts-{pname}", SW + ["--prompts", "{d}/p.jsonl", "--out", "{d}/o"], why,
        lambda d, pdata=pdata: (models_only(d), _w(d / "p.jsonl", pdata)) and None)

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

# --- advise (landed on main with issue 17) -----------------------------------------------------
AD = ["advise", "{d}/log.jsonl"]


def good_log(d: Path) -> None:
    log(d, *(rec(cycle=i, t=1764400000.0 + i) for i in range(8)))


cli("advise-no-files", ["advise"], "required")
cli("advise-missing-file", AD, "no such file")
cli("advise-bad-log", AD, "no valid timing records", lambda d: log(d, rec(bs=-1)))
for flag, value, why in (("--steps", "0", "integers from 1 to 64"), ("--steps", "1,1000000000", "integers from 1 to 64"),
                         ("--steps", "a", "integers from 1 to 64"), ("--max-steps", "0", "from 1 to 64"),
                         ("--max-steps", "1000000000", "from 1 to 64"), ("--baseline-step-ms", "nan", "not a finite number"),
                         ("--baseline-step-ms", "0", "positive number"), ("--calibration-tolerance", "1", "must be > 1"),
                         ("--calibration-tolerance", "inf", "not a finite number"), ("--rank", "7", "no records for that rank"),
                         ("--calibration", "{d}/nope", "not a directory"), ("--calibration", "{d}", "no results.jsonl"),
                         ("--baseline-log", "{d}/nope.log", "no such file"),
                         ("--baseline-log", "{d}/log.jsonl", "no steady 'Decode batch")):
    cli(f"advise{flag}-{value}"[:60], AD + [flag, value], why, good_log)
cli("advise-two-baselines", AD + ["--baseline-step-ms", "5", "--baseline-log", "{d}/x.log"], "not allowed with", good_log)
cli("advise-calibration-bad-row", AD + ["--calibration", "{d}/g"], "results.jsonl:2",
    lambda d: (good_log(d), sweep_dir(d, "g", [json.dumps(row()), json.dumps(row(bs="8"))])) and None)

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
cli("sweep-simulate-acceptance-nan", SW + ["--simulate-acceptance", "nan", "--out", "{d}/o"], "finite", models_only)
cli("sweep-simulate-acceptance-big", SW + ["--simulate-acceptance", "2", "--out", "{d}/o"], "outside [0, 1]", models_only)
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
                        ("collapse-window-zero", '{"accept_collapse_window": 0}', "'accept_collapse_window'"),
                        ("collapse-threshold-text", '{"accept_collapse_threshold": "x"}', "'accept_collapse_threshold'"),
                        ("on-collapse-stop", '{"on_accept_collapse": "stop"}', "'on_accept_collapse'"),
                        ("patches-bogus", '{"patches": ["bogus"]}', "unknown feature"),
                        ("patches-string", '{"patches": "timing"}', "'patches'"),
                        ("unknown-key", '{"bogus": 1}', "unknown keys"),
                        ("not-json", "{nope", "not valid JSON"), ("list", "[]", "must be a JSON object"),
                        ("deep", DEEP, "nested too deeply")):
    case(f"plugin-{name}", "plugin", [text], 2, why)
