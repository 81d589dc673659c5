"""The sweep directory: results.jsonl (one row per configuration x batch size, appended + fsynced as
soon as it is measured), sweep.json (the settings a resumed sweep must match) and plan.json.

Without --resume a directory that already holds a sweep is refused (exit 2); --force moves the old
results.jsonl / sweep.json / search.json / timing / logs to `<name>.bak-<time>` (nothing is deleted).
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from sglang_patches.errors import UserError

RESULTS = "results.jsonl"
MANIFEST = "sweep.json"
PLAN = "plan.json"
SEARCH = "search.json"
_MOVED_ON_FORCE = (RESULTS, MANIFEST, SEARCH, "timing", "logs")
# sweep.json keys that must match for --resume (the rest, e.g. batch sizes or repeats, may change).
MATCH_KEYS = ("target", "draft", "algorithm", "load_format", "max_new_tokens", "prompts_sha256",
              "simulate_acc_len", "extra_server_args", "env", "ignore_eos")


def read_rows(out_dir: str | Path) -> list[dict]:
    """All rows of results.jsonl; a torn last line (a crash mid-write) is skipped with a warning."""
    path = Path(out_dir) / RESULTS
    if not path.exists():
        return []
    rows = []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for i, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError:
                print(f"sglang-patches sweep: warning: {path} line {i} is not JSON; ignored", file=sys.stderr)
                continue
            if isinstance(row, dict) and "config" in row and "batch_size" in row:
                rows.append(row)
    return rows


def append_row(out_dir: str | Path, row: dict) -> None:
    path = Path(out_dir) / RESULTS
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(row, sort_keys=True) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def done_keys(rows: list[dict]) -> set[tuple[str, int]]:
    """(config name, batch size) pairs with an ok row: what --resume skips. Failed rows are retried."""
    return {(r["config"], int(r["batch_size"])) for r in rows if r.get("status") == "ok"}


def latest_rows(rows: list[dict]) -> dict[tuple[str, int], dict]:
    """One row per (config, batch size): the last ok row, else the last failed one."""
    out: dict[tuple[str, int], dict] = {}
    for r in rows:
        key = (r["config"], int(r["batch_size"]))
        prev = out.get(key)
        if prev is None or r.get("status") == "ok" or prev.get("status") != "ok":
            out[key] = r
    return out


def has_sweep(out_dir: Path) -> bool:
    res = out_dir / RESULTS
    return (res.is_file() and res.stat().st_size > 0) or (out_dir / MANIFEST).is_file()


def prepare_out_dir(out_dir: str | Path, *, resume: bool, force: bool, manifest: dict) -> Path:
    """Create/check DIR for a run; returns it. UserError (exit 2) where it is not usable as asked."""
    out = Path(out_dir)
    if resume and force:
        raise UserError("--resume and --force contradict each other; --resume continues the sweep in --out, "
                        "--force starts it over (keeping the old results as a .bak file)")
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} exists and is not a directory; choose another path")
    if out.is_dir() and has_sweep(out):
        if force:
            stamp = time.strftime("%Y%m%d-%H%M%S")
            for name in _MOVED_ON_FORCE:
                p = out / name
                if p.exists():
                    p.rename(out / f"{name}.bak-{stamp}")
            print(f"sglang-patches sweep: --force: previous results kept as {RESULTS}.bak-{stamp}", file=sys.stderr)
        elif resume:
            _check_manifest(out, manifest)
        else:
            n = len(read_rows(out))
            raise UserError(f"--out {out} already holds a sweep ({n} rows in {RESULTS}); pass --resume to "
                            f"continue it, --force to start over (old results are kept as {RESULTS}.bak-<time>), "
                            f"or choose another --out")
    try:
        (out / "logs").mkdir(parents=True, exist_ok=True)
        (out / "timing").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create --out {out}: {exc.strerror}; choose a writable directory") from None
    write_json(out / MANIFEST, manifest)
    return out


def _check_manifest(out: Path, manifest: dict) -> None:
    try:
        old = json.loads((out / MANIFEST).read_text())
    except (OSError, ValueError):
        return  # rows without a manifest (an interrupted first write): nothing to compare
    diffs = [k for k in MATCH_KEYS if k in old and old.get(k) != manifest.get(k)]
    if diffs:
        detail = "; ".join(f"{k}: was {old.get(k)!r}, now {manifest.get(k)!r}" for k in diffs)
        raise UserError(f"--resume: the sweep in {out} was run with other settings ({detail}); rerun with the "
                        f"same settings, or pass --force / a new --out to start over")


def write_json(path: Path, obj) -> None:
    tmp = Path(str(path) + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)


def read_json(path: Path):
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
