"""The checks on `advise --adaptive-config OUT.json` before anything is read or written: OUT is new
(or --force), not one of the inputs (the logs, --baseline-log, --calibration's files; even with
--force), not a directory, and in a folder that exists."""
from __future__ import annotations

import os
from pathlib import Path

from sglang_patches.errors import UserError


def _inputs(args) -> list[Path]:
    paths = [Path(p) for p in args.files]
    if args.baseline_log:
        paths.append(Path(args.baseline_log))
    if args.calibration:
        d = Path(args.calibration)
        paths.append(d)
        if d.is_dir():
            paths += [p for p in d.rglob("*") if p.is_file()]
    return paths


def _same(a: Path, b: Path) -> bool:
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
    except OSError:
        pass
    return os.path.realpath(a) == os.path.realpath(b)


def check_out(args) -> Path:
    """OUT must be new (or --force), not an input, not a directory, in an existing folder."""
    if not args.adaptive_config.strip():  # Path("") is ".", the current folder: never a file to write
        raise UserError("--adaptive-config: empty file name; give the file to write, e.g. --adaptive-config adaptive.json")
    out = Path(args.adaptive_config)
    for p in _inputs(args):
        if _same(out, p):
            raise UserError(f"--adaptive-config {out}: that is an input ({p}); write the config to a new file")
    if out.is_dir():
        raise UserError(f"--adaptive-config {out}: is a directory; give a file name, e.g. {out}/adaptive.json")
    if (out.exists() or out.is_symlink()) and not args.force:
        raise UserError(f"--adaptive-config {out}: already exists; pass --force to overwrite it, or another name")
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        raise UserError(f"--adaptive-config {out}: folder {parent} does not exist; create it first")
    return out
