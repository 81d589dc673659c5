"""The adaptive benchmark's prompt files: which ood set an --out measured (pinned, so a resumed run
cannot mix two sets in one table)."""
from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OOD_PROMPTS = REPO / "benchmarks" / "data" / "ood_python.jsonl"
_PINNED = [OOD_PROMPTS]  # set by pin_ood_prompts


def ood_prompts() -> Path:
    """The ood set of this --out (pinned by pin_ood_prompts)."""
    return _PINNED[0]


def pin_ood_prompts(out: Path, wanted: str | None) -> str | None:
    """OUT/ood_prompts.txt names the ood set its cells measured; a rerun that asks for another one is
    refused (its cells would mix two sets). Returns the refusal or None, and sets ood_prompts()."""
    pin = out / "ood_prompts.txt"
    had = pin.read_text().strip() if pin.exists() else None
    if had is None and any((out / "cells").glob("*_ood_*")):
        had = repo_rel(OOD_PROMPTS)  # measured before the set was pinned: the only set there was then
    path = repo_rel(Path(wanted)) if wanted else (had or repo_rel(OOD_PROMPTS))
    if had and had != path:
        return f"--ood-prompts {wanted}: {out} measured the ood set {had}; use another --out for another set"
    if not (REPO / path).is_file():
        return (f"--ood-prompts {wanted}: no such file" if wanted else
                f"{pin} names {path}, which no longer exists; restore it or use another --out")
    out.mkdir(parents=True, exist_ok=True)
    pin.write_text(path + "\n")
    _PINNED[0] = REPO / path
    return None


def repo_rel(path: Path) -> str:
    """A path inside the repository as repo-relative (the pin survives a checkout that moves), any
    other as absolute."""
    p = Path(path).resolve()
    try:
        return str(p.relative_to(REPO))
    except ValueError:
        return str(p)
