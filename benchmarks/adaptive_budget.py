"""How long adaptive_bench's pieces take, for its --deadline: a server start and a cell.

The first guesses are fixed (below). Once --out holds measured starts and cells (same machine kind,
prompts and flags: earlier in this run, or in the run it resumes), the largest measured value of the
same kind times MARGIN replaces the guess. The guesses ran 20-40 % over the H200's own figures
(2026-12-03: starts 62-71 s warm, 105 s for a fresh machine's first; cells 22-25 s / 10-12 s at
24 / 64 prompts), which left one server out of each call.
"""
from __future__ import annotations

import json
from pathlib import Path

START_S = {"plain": 90, "fixed": 90, "adaptive": 110}  # 79-128 s measured (2026-12-02, fresh and warm)
# A cell: warm-up and client start (~5 s), then its prompts at the slowest row's rate (plain decode:
# 216-219 / 1580-1625 tok/s at concurrency 1 / 8).
CELL_FIXED_S = 5.0
CELL_FLOOR_TOK_S = {1: 200.0, 8: 1400.0}
MARGIN = 1.15
STOP_S = 10.0  # a server's stop and the export after it


def cell_guess(args, bs: int) -> float:
    """Seconds one cell is expected to take before any was measured, warm-up and client included."""
    n = args.prompts_bs1 if bs == 1 else args.prompts_bs8
    return CELL_FIXED_S + n * args.output_len / CELL_FLOOR_TOK_S[bs]


def cell_s(args, cells: dict, bs: int) -> float:
    """The largest measured cell of this concurrency (`cells`: those of --out with this run's
    prompt counts and lengths) times MARGIN; the guess when none was measured."""
    got = [c["t1"] - c["t0"] for c in cells.values() if c.get("bs") == bs and "t0" in c and "t1" in c]
    return MARGIN * max(got) if got else cell_guess(args, bs)


def start_s(out: Path, kind: str) -> float:
    """A server start of this kind (plain / fixed / adaptive) and its stop: the largest measured
    start of --out times MARGIN, plus STOP_S; the guess when none of the kind was measured."""
    got = []
    for f in sorted((Path(out) / "starts").glob("*.json")):
        try:
            st = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        if st.get("kind") == kind and isinstance(st.get("startup_s"), (int, float)):
            got.append(float(st["startup_s"]))
    return MARGIN * max(got) + STOP_S if got else float(START_S[kind])
