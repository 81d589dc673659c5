"""Prompt files for the sweep: JSONL (`{"prompt": ...}` or `{"text": ...}` per line) or plain text
(one prompt per non-empty line). Every problem is a UserError raised before any engine starts.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from sglang_patches.errors import UserError

DEFAULT_PROMPTS = Path(__file__).resolve().parents[2] / "data" / "prompts_mixed.jsonl"
# held-out Python-source prompts for the trained fixture (sglang_patches.offline.fixtures)
EVAL_PROMPTS = Path(__file__).resolve().parents[2] / "data" / "eval_prompts.jsonl"


def _is_jsonl(path: Path, text: str) -> bool:
    if path.suffix.lower() in (".jsonl", ".json", ".ndjson"):
        return True
    if path.suffix.lower() == ".txt":
        return False
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    if not first.startswith("{"):
        return False
    try:
        return isinstance(json.loads(first), dict)
    except (ValueError, RecursionError):
        return False


def load_prompts(path: str | Path | None = None) -> list[str]:
    path = Path(path) if path else DEFAULT_PROMPTS
    if not path.exists():
        raise UserError(f"--prompts {path}: no such file; give a JSONL or text file of prompts")
    if not path.is_file():
        raise UserError(f"--prompts {path} is not a regular file; give a JSONL or text file of prompts")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UserError(f"--prompts {path}: cannot read ({exc.strerror or exc})") from None
    if b"\x00" in data:
        raise UserError(f"--prompts {path} looks binary (NUL bytes); give a UTF-8 JSONL or text file")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UserError(f"--prompts {path} is not UTF-8 (byte {exc.start}); re-encode it as UTF-8") from None
    prompts: list[str] = []
    if _is_jsonl(path, text):
        for i, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except RecursionError:
                raise UserError(f"--prompts {path} line {i} is nested too deeply; one JSON object per line") from None
            except ValueError as exc:
                raise UserError(f"--prompts {path} line {i} is not valid JSON ({getattr(exc, 'msg', exc)}); one JSON object "
                                f"per line, or use a .txt file with one prompt per line") from None
            value = None
            if isinstance(obj, dict):
                value = obj.get("prompt", obj.get("text"))
            elif isinstance(obj, str):
                value = obj
            if not isinstance(value, str):
                raise UserError(f"--prompts {path} line {i} has no string \"prompt\" or \"text\" field")
            if value.strip():
                prompts.append(value)
    else:
        prompts = [ln for ln in text.splitlines() if ln.strip()]
    if not prompts:
        raise UserError(f"--prompts {path} holds no prompts; give at least one non-empty prompt")
    return prompts


def prompts_digest(prompts: list[str]) -> str:
    h = hashlib.sha256()
    for p in prompts:
        h.update(p.encode())
        h.update(b"\x00")
    return h.hexdigest()[:16]
