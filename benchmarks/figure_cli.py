"""What every benchmark entry point's command line shares: the figure it makes, and --dry-run.

`declare(parser, figure=..., folder=..., duration=...)` appends to the parser's epilog which figure the
script makes (a row of docs/status.md and its results folder) and how long it takes on one GPU, and adds
`--dry-run`. `dry_run(...)` prints the plan (servers with their commands, cases, inputs, output folder)
and returns 0: nothing is started, nothing is written. This module imports nothing heavy.
"""
from __future__ import annotations

import argparse
import shlex

DRY_RUN_BANNER = "dry run: nothing started, nothing written"


def declare(ap: argparse.ArgumentParser, *, figure: str, folder, duration: str) -> argparse.ArgumentParser:
    """Say in --help which figure this makes (folder: one results folder or a tuple) and how long it takes;
    add --dry-run."""
    note = figure_note(figure=figure, folder=folder, duration=duration)
    ap.epilog = f"{ap.epilog}\n\n{note}" if ap.epilog else note
    ap.add_argument("--dry-run", action="store_true",
                    help="print the plan (servers and their commands, cases, output folder) and exit; starts nothing")
    return ap


def figure_note(*, figure: str, folder, duration: str) -> str:
    """The --help sentence: the figure, its results folder(s), the time on one GPU."""
    folders = ", ".join(f"benchmarks/results/{f}/" for f in ((folder,) if isinstance(folder, str) else folder))
    return (f"Makes: {figure} (docs/status.md; {folders}). "
            f"Time on one GPU: {duration}. --dry-run prints the plan and starts nothing.")


def _line(item) -> str:
    return shlex.join(str(x) for x in item) if isinstance(item, (list, tuple)) else str(item)


def dry_run(*, out, servers=(), cases=(), reads=(), notes=()) -> int:
    """Print the plan; the first line says nothing ran."""
    print(DRY_RUN_BANNER)
    print(f"output: {out}")
    for label, items in (("server", servers), ("case", cases), ("reads", reads), ("note", notes)):
        for item in items:
            print(f"{label}: {_line(item)}")
    return 0
