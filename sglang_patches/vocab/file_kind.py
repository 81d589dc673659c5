"""What a file given as a log looks like, read from its head without failing: so that a file of
another kind (a chat-request JSONL, bench_serving's results, one JSON document, a server's
stdout log, a timing log where a server log is wanted) is named for what it is, with the file
wanted instead, in every command that reads logs.

Recognised from the first JSON line's keys:
- a timing log: `"schema": "sglang_patches.spec_timing"` (speculative when a decode record drafted);
- a chat-request JSONL: `{"messages": [...]}` (OpenAI chat), `{"conversations": [...]}` (ShareGPT),
  `{"prompt": ...}` (completions);
- an OpenAI response JSONL: `{"choices": [...]}`;
- SGLang's bench_serving results (`python -m sglang.bench_serving --output-file`, one object per
  run): `"backend"` beside its metrics (`output_throughput`, `request_throughput`, `median_tpot_ms`);
- any other object: a JSONL of other records, named by its first keys.
A gzip or xz file is looked into (timing logs are read compressed: log_open.py); zstd, which Python cannot read,
is named as such, whatever it holds, as is a compressed file where a server's log is wanted: decompress it first.
A file that is one JSON value spread over several lines is a JSON document; SGLang's own log lines
(`server_args=ServerArgs(`, `Decode batch ... #running-req`) with no JSON line at the head make a
server's log.
"""
from __future__ import annotations

import itertools
import json
import os
import re
from typing import NamedTuple

from sglang_patches.vocab.bounded_lines import bounded_lines
from sglang_patches.vocab.log_open import DAMAGED, FIX, compression, open_log
from sglang_patches.vocab.schema import SCHEMA_NAME

HEAD_BYTES = 1 << 18
LINE_BYTES = 1 << 20
SERVER_LOG_MARKS = re.compile(rb"server_args=ServerArgs\(|Decode batch.{0,40}#running-req|Prefill batch.{0,40}#new-seq")
BENCH_KEYS = ("output_throughput", "request_throughput", "median_tpot_ms", "completed")
TIMING_LOG_FIX = "pass the file written by `--timing-log`"
SERVER_LOG_FIX = "pass the stdout/stderr log of a SGLang server run without speculation"
# A compressed file's first bytes -> what to say: "PATH is xz-compressed: ..." (the records are inside)
COMPRESSED_MAGIC = {b"\x28\xb5\x2f\xfd": "is zstd-compressed: unzstd it first"}  # gzip, xz: read (log_open.py)


class Kind(NamedTuple):
    key: str    # "timing-speculative", "timing-plain", "chat", "response", "bench", "records", "json", "server", "compressed"
    label: str  # what it looks like, for messages ("a chat-request JSONL ({"messages": [...]} lines)")


def sniff(path: str | os.PathLike, scan_lines: int = 5000) -> Kind | None:
    """What `path` looks like (None: nothing recognised, or unreadable)."""
    try:
        with open_log(path) as fh:
            head = fh.read(HEAD_BYTES)
            for magic, fix in COMPRESSED_MAGIC.items():
                if head.startswith(magic):
                    return Kind("compressed", fix)
            fh.seek(0)
            lines = (raw or b"" for raw, _ in bounded_lines(fh, LINE_BYTES))  # an over-long line reads as empty
            first = next((ln for ln in itertools.islice(lines, 50) if ln.strip()), b"")
            obj = _json(first)
            if isinstance(obj, dict) and obj.get("schema") == SCHEMA_NAME:
                spec = any(_drafting(_json(ln)) for ln in itertools.chain([first], itertools.islice(lines, scan_lines)))
                return (Kind("timing-speculative", "a speculative server's timing log (--timing-log JSONL)") if spec
                        else Kind("timing-plain", "a timing log (--timing-log JSONL) of a server that drafted nothing"))
    except (OSError, *DAMAGED):  # unreadable, or a broken archive: the reader says which
        return None
    if isinstance(obj, dict):
        return _record_kind(obj)
    if obj is None and _one_json_document(path):
        return Kind("json", "one JSON document (an adaptive config, a summary?)")
    if obj is None and SERVER_LOG_MARKS.search(head) and not any(
            ln.lstrip().startswith(b"{") for ln in head.splitlines()):
        return Kind("server", "a SGLang server's log")
    return None


def _record_kind(obj: dict) -> Kind:
    if isinstance(obj.get("messages"), list) or isinstance(obj.get("conversations"), list) or (
            "prompt" in obj and isinstance(obj["prompt"], (str, list))):
        key = next(k for k in ("messages", "conversations", "prompt") if k in obj)
        shape = "[...]" if key != "prompt" else "..."
        return Kind("chat", f'a chat-request JSONL ({{"{key}": {shape}}} lines)')
    if isinstance(obj.get("choices"), list):
        return Kind("response", 'an OpenAI API response JSONL ({"choices": [...]} lines)')
    if "backend" in obj and any(k in obj for k in BENCH_KEYS):
        return Kind("bench", "SGLang bench_serving results (its --output-file JSONL)")
    keys = ", ".join(str(k)[:30] for k in itertools.islice(obj, 4))
    return Kind("records", f"a JSONL of other records (keys {keys}{', ...' if len(obj) > 4 else ''})")


def not_a_timing_log(path: str) -> str | None:
    """The one-line refusal for `path` given where a timing log is wanted (None: it may be one)."""
    kind = sniff(path)
    if kind is None or kind.key.startswith("timing"):
        return None
    if kind.key == "compressed":
        return f"{path} {kind.label}, then pass the timing log inside"
    also = "; a server log without speculation is what --baseline-log takes" if kind.key == "server" else ""
    return f"{path}: looks like {kind.label}, not a timing log: {TIMING_LOG_FIX}{also}"


def not_a_server_log(path: str, what: str) -> str | None:
    """The one-line refusal for `path` given as `what` (e.g. --baseline-log), where a SGLang server's
    stdout/stderr log is wanted (None: nothing recognised)."""
    try:
        packed = compression(path)  # a server's log is read uncompressed (decode_log.py)
    except OSError:
        packed = None
    kind = Kind("compressed", FIX[packed]) if packed else sniff(path)
    if kind is None or kind.key == "server":
        return None
    if kind.key == "compressed":
        return f"{what} {path} {kind.label}, then pass the server log inside"
    if kind.key == "timing-speculative":
        return (f"{what} {path}: that is a speculative server's timing log (--timing-log JSONL), the LOG to advise on, "
                "not a baseline; give the stdout/stderr log of a SGLang server without speculation")
    if kind.key == "timing-plain":
        return (f"{what} {path}: that is a timing log (--timing-log JSONL), not a SGLang server's log; a plain "
                f"server's timing log (--patches all,step_timing) goes in as a second LOG: sglang-patches advise LOG "
                f"{path}")
    return f"{what} {path}: looks like {kind.label}, not a SGLang server's log: {SERVER_LOG_FIX}"


def _json(raw: bytes):
    try:
        return json.loads(raw.decode("utf-8", "replace").strip()) if raw.strip() else None
    except (ValueError, RecursionError):
        return None


def _drafting(rec) -> bool:
    """A cycle that drafted, or a speculative server's steps-0 cycle (`plain`)."""
    return isinstance(rec, dict) and rec.get("kind") == "decode" and (
        rec.get("plain") is True or (isinstance(rec.get("steps"), int) and rec["steps"] > 0))


def _one_json_document(path, limit: int = 16 << 20) -> bool:
    """True for a file (up to `limit` bytes) that is one JSON object or array spread over lines."""
    try:
        if os.path.getsize(path) > limit:
            return False
        with open(path, "rb") as fh:
            return isinstance(json.loads(fh.read().decode("utf-8", "replace")), (dict, list))
    except (OSError, ValueError, RecursionError):
        return False
