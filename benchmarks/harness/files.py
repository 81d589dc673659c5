"""A benchmark run's files: read leniently (a missing or unreadable one reads as ""), JSON written
atomically (a run stopped mid-write leaves the old file, never half of one), and the header every
results file starts with (run_meta)."""
from __future__ import annotations

import datetime
import json
import os
import shlex
import sys
from pathlib import Path


def run_meta(env: dict | None = None) -> dict:
    """The exact command (this interpreter and argv), the UTC date and the versions with the GPU
    (sglang_patches.versions.collect: sglang, torch, CUDA, GPU names) that a published figure names.
    `env`: versions already collected (a script that reads them in the child process that owns the GPU)."""
    from sglang_patches.versions import collect

    if env is None:
        try:
            env = collect()
        except Exception as exc:  # noqa: BLE001 - a results file is still written, saying why versions are missing
            env = {"error": repr(exc)}
    return {"command": shlex.join([sys.executable, *sys.argv]),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "env": env}


def read_text(path) -> str:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return ""


def write_json(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(obj, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)
