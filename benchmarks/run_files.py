"""A benchmark run's files: read leniently (a missing or unreadable one reads as ""), JSON written
atomically (a run stopped mid-write leaves the old file, never half of one)."""
from __future__ import annotations

import json
import os
from pathlib import Path


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
