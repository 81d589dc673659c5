"""The adaptive benchmark's traffic: which ood set and which sampling temperature an --out measured
(pinned, so a resumed run cannot mix two sets or two temperatures in one table)."""
from __future__ import annotations

import math
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OOD_PROMPTS = REPO / "benchmarks" / "data" / "ood_python.jsonl"
_PINNED = [OOD_PROMPTS]  # set by pin_ood_prompts
_TEMPERATURE = [0.0]  # set by pin_temperature


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


def temperature() -> float:
    """The sampling temperature of this --out (pinned by pin_temperature; 0: greedy)."""
    return _TEMPERATURE[0]


def client_flags() -> list[str]:
    """bench_serving's flag for the pinned temperature (none for greedy, its default: commands of greedy
    runs stay as they were)."""
    return ["--temperature", repr(temperature())] if temperature() > 0 else []


def temperature_problem(wanted: float | None) -> str | None:
    """Why --temperature `wanted` cannot be used (one line), or None."""
    if wanted is not None and (not math.isfinite(wanted) or wanted < 0):
        return f"--temperature {wanted}: give a number >= 0 (0: greedy decoding)"
    return None


def pin_temperature(out: Path, wanted: float | None) -> str | None:
    """OUT/temperature.txt names the temperature its cells ran at (bench_serving's --temperature and the
    warm-up's); a rerun that asks for another is refused. Cells measured before the pin ran greedy.
    Returns the refusal (one line) or None, and sets temperature()."""
    if temperature_problem(wanted):
        return temperature_problem(wanted)
    pin = out / "temperature.txt"
    try:
        had = float(pin.read_text()) if pin.exists() else (0.0 if any((out / "cells").glob("*.json")) else None)
    except ValueError:
        return f"{pin} does not hold a number; restore it or use another --out"
    t = wanted if wanted is not None else (had or 0.0)
    if had is not None and had != t:
        return f"--temperature {wanted:g}: {out} measured at temperature {had:g}; use another --out for another temperature"
    out.mkdir(parents=True, exist_ok=True)
    pin.write_text(f"{t!r}\n")
    _TEMPERATURE[0] = t
    return None
