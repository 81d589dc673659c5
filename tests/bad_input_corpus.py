"""The bad-input corpus's building blocks: every case is generated at test time (no input file is
committed). The cases themselves are in bad_input_cli.py (the `sglang-patches` subcommands other
than sweep), bad_input_sweep.py (`sglang-patches sweep`) and bad_input_launch.py (the launcher and
the plugin); this module holds the input builders they share and the Case type.

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
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from preflight_models import eagle3_cfg, eagle3_tensors, make_dir, target_cfg

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


class Cases(list):
    """One group's cases, in the order they are added (each group module keeps its own)."""

    def case(self, name, runner, argv, code, expect, setup=None, **env):
        self.append(Case(name, runner, list(argv), code, expect, setup, dict(env)))

    def cli(self, name, argv, expect, setup=None, code=2, **env):
        self.case(name, "cli", argv, code, expect, setup, **env)
