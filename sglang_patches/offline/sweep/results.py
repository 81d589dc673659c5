"""The sweep directory: results.jsonl (one row per configuration x batch size, appended + fsynced as
soon as it is measured), sweep.json (the settings a resumed sweep must match) and plan.json.

Without --resume a directory that already holds a sweep is refused (exit 2); --force moves the old
results.jsonl / sweep.json / search.json / timing / logs to `<name>.bak-<time>` (nothing is deleted).
"""
from __future__ import annotations

import json
import math
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


def _num(x, lo: float = 0.0) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= lo


def _opt_num(x) -> bool:
    return x is None or _num(x)


def _num_list(x) -> bool:
    return isinstance(x, list) and all(_num(v) for v in x)


def _num_dict(x) -> bool:
    return isinstance(x, dict) and all(isinstance(k, str) and _opt_num(v) for k, v in x.items())


def _pos_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 1


def row_problem(row) -> str | None:
    """Why `row` is not a usable results.jsonl row (type and range of every field the report, the
    search and --resume read), or None."""
    if not isinstance(row, dict):
        return f"a JSON {type(row).__name__}, not a row object"
    if not isinstance(row.get("config"), str) or not row["config"]:
        return f"config must be a configuration name, got {row.get('config')!r}"
    if not _pos_int(row.get("batch_size")):
        return f"batch_size must be an integer >= 1, got {row.get('batch_size')!r}"
    if row.get("status") not in ("ok", "failed"):
        return f"status must be \"ok\" or \"failed\", got {row.get('status')!r}"
    spec = row.get("spec")
    if spec is not None and not (isinstance(spec, dict) and all(_pos_int(spec.get(k)) for k in
                                                                ("steps", "topk", "draft_tokens"))):
        return f"spec must be null or {{steps, topk, draft_tokens}} integers >= 1, got {spec!r}"
    if (spec is None) != (row["config"] == "baseline"):
        return f"config {row['config']!r} with spec {spec!r}: only the baseline has no spec"
    if row["status"] == "ok" and not _num(row.get("tok_s")):
        return f"an ok row needs tok_s >= 0, got {row.get('tok_s')!r}"
    for key in ("tok_s_per_request", "accept_length", "accept_length_client", "server_start_s", "steady_tok_s",
                "steady_cycle_ms", "measure_s"):
        if not _opt_num(row.get(key)):
            return f"{key} must be a number >= 0 or null, got {row.get(key)!r}"
    if row.get("steady_windows") is not None and not (isinstance(row["steady_windows"], int)
                                                       and not isinstance(row["steady_windows"], bool)
                                                       and row["steady_windows"] >= 0):
        return f"steady_windows must be an integer >= 0 or null, got {row['steady_windows']!r}"
    for key in ("tok_s_repeats", "tok_s_per_request_repeats", "pos_rates", "cond_rates"):
        if row.get(key) is not None and not _num_list(row[key]):
            return f"{key} must be a list of numbers >= 0 or null"
    for key in ("phases_p50_ms", "phase_shares"):
        if row.get(key) is not None and not _num_dict(row[key]):
            return f"{key} must be an object of numbers >= 0 or null"
    for key in ("reason", "log_path", "command", "date", "target", "draft"):
        if row.get(key) is not None and not isinstance(row[key], str):
            return f"{key} must be text or null, got {type(row[key]).__name__}"
    return None


def read_rows(out_dir: str | Path) -> list[dict]:
    """All rows of results.jsonl; a torn line (a crash mid-write) is skipped with a warning, a row of
    the wrong shape is a UserError naming the line (nothing has been written when it is raised)."""
    path = Path(out_dir) / RESULTS
    if not path.exists():
        return []
    if not path.is_file():
        raise UserError(f"{path} is not a file; a sweep directory holds results.jsonl as a file")
    rows = []
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for i, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except (ValueError, RecursionError):
                    print(f"sglang-patches sweep: warning: {path}:{i}: not JSON; ignored", file=sys.stderr)
                    continue
                problem = row_problem(row)
                if problem:
                    raise UserError(f"{path}:{i}: {problem}; fix or delete that line (nothing was written)")
                rows.append(row)
    except OSError as err:
        raise UserError(f"cannot read {path} ({err.strerror or err})") from None
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


def prepare_out_dir(out_dir: str | Path, *, resume: bool, force: bool, manifest: dict, last_check=None) -> Path:
    """Create/check DIR for a run; returns it. UserError (exit 2) where it is not usable as asked.
    `last_check()`: a check of the caller's to run after these and before anything is moved or written."""
    out = Path(out_dir)
    if resume and force:
        raise UserError("--resume and --force contradict each other; --resume continues the sweep in --out, "
                        "--force starts it over (keeping the old results as a .bak file)")
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} exists and is not a directory; choose another path")
    if (out / RESULTS).exists() and not (out / RESULTS).is_file() and not force:
        raise UserError(f"{out / RESULTS} is not a file; move it away or choose another --out")
    if out.is_dir() and has_sweep(out) and not force and not resume:
        try:
            n = len(read_rows(out))
        except UserError:
            n = "some"
        raise UserError(f"--out {out} already holds a sweep ({n} rows in {RESULTS}); pass --resume to "
                        f"continue it, --force to start over (old results are kept as {RESULTS}.bak-<time>), "
                        f"or choose another --out")
    if out.is_dir() and has_sweep(out) and resume:
        _check_manifest(out, manifest)
        read_rows(out)  # every row valid before anything is written
    if last_check is not None:
        last_check()
    if out.is_dir() and has_sweep(out):
        if force:
            stamp = time.strftime("%Y%m%d-%H%M%S")
            for name in _MOVED_ON_FORCE:
                p = out / name
                if p.exists():
                    p.rename(out / f"{name}.bak-{stamp}")
            print(f"sglang-patches sweep: --force: previous results kept as {RESULTS}.bak-{stamp}", file=sys.stderr)
    try:
        (out / "logs").mkdir(parents=True, exist_ok=True)
        (out / "timing").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create --out {out}: {exc.strerror}; choose a writable directory") from None
    write_json(out / MANIFEST, manifest)
    return out


def read_manifest(out: Path, *, required: bool = False) -> dict | None:
    """DIR/sweep.json as a dict; None when absent (and not required); UserError when it is not an object."""
    path = Path(out) / MANIFEST
    if not path.exists():
        if required:
            raise UserError(f"{out} holds no sweep ({MANIFEST} missing); give a sweep directory")
        return None
    data = read_json(path)
    if not isinstance(data, dict):
        raise UserError(f"{path} is not a sweep manifest (a JSON object); restore it from a backup or "
                        "start over with --force / a new --out")
    if not isinstance(data.get("batch_sizes", []), list) or not all(
            _pos_int(b) for b in data.get("batch_sizes", [])):
        raise UserError(f"{path}: batch_sizes must be a list of integers >= 1")
    return data


def read_object(path: Path, what: str, fix: str = "delete it or rerun the sweep") -> dict | None:
    """An optional JSON object file (plan.json, search.json): None when absent, UserError naming
    `fix` when unreadable or not an object."""
    path = Path(path)
    if not path.exists():
        return None
    data = read_json(path)
    if not isinstance(data, dict):
        raise UserError(f"{path} is not a {what} (a JSON object); {fix}")
    return data


def _check_manifest(out: Path, manifest: dict) -> None:
    old = read_manifest(out)
    if old is None:
        return  # rows without a manifest (an interrupted first write): nothing to compare
    diffs = [k for k in MATCH_KEYS if k in old and old.get(k) != manifest.get(k)]
    if diffs:
        detail = "; ".join(f"{k}: was {old.get(k)!r}, now {manifest.get(k)!r}" for k in diffs)
        raise UserError(f"--resume: the sweep in {out} was run with other settings ({detail}); rerun with the "
                        f"same settings, or pass --force / a new --out to start over")


def after_the_fact(row: dict, out_dir, folder: str, path_key: str, suffix: str):
    """(a log of `row`'s server, the span of `row`'s measurement) for reading that log after the
    run, or None. The log: DIR/<folder>/<name> first (a copied folder), else the row's own
    `path_key`. The span: [date - measure_s - 2 s, date + 1 s] as datetimes, naive when the date
    is (date is stamped when the row ends; logs keep 1-s clocks). None for a row measured under
    --profile-seconds, whose measure_s also covers the profiling load. A row without a usable
    date or measure_s raises (KeyError, TypeError, ValueError, OverflowError)."""
    import datetime

    if "profile_dir" in row:
        return None
    end = datetime.datetime.fromisoformat(row["date"])
    span = (end - datetime.timedelta(seconds=float(row["measure_s"]) + 2), end + datetime.timedelta(seconds=1))
    name = Path(row.get(path_key) or f"{row['config']}{suffix}").name
    for path in (Path(out_dir) / folder / name, row.get(path_key)):
        if path and Path(path).is_file():
            return Path(path), span
    return None


def write_json(path: Path, obj) -> None:
    write_text_atomic(path, json.dumps(obj, indent=1, sort_keys=True) + "\n")


def write_text_atomic(path: Path, text: str) -> None:
    """Write through a new temp file in the same folder, then rename it over `path`: a kill never
    leaves half a `path` (at worst a hidden .NAME.PID.HEX.tmp beside it). The temp file has a random name and is created exclusively (O_EXCL), so a
    symlink planted at a temp name can never redirect the write onto another file. A path that cannot be
    written (a directory, a read-only folder) is a one-line UserError."""
    import errno
    import secrets

    path = Path(path)
    tmp = None
    try:
        if path.is_dir():
            raise IsADirectoryError(errno.EISDIR, "is a directory")
        name = str(path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        # O_EXCL: never an existing file or symlink; mode 0o666 less the umask, like a plain open()
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        tmp = name   # ours from here on: only now may the cleanup below remove it
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
        tmp = None
    except OSError as err:
        raise UserError(f"{path}: cannot be written ({err.strerror or err}); choose another output path or "
                        "check the folder's permissions") from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass   # already gone; a hidden .NAME.*.tmp stays only if the process is killed mid-write


def read_json(path: Path):
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
