"""`sglang-patches profile`: host-side profile of a running SGLang server's schedulers.

    sglang-patches profile --url http://127.0.0.1:30000 --seconds 10 --out prof1 [--native]
        [--rate 100] [--no-torch-profiler] [--no-py-spy]

For one window of --seconds: py-spy on every scheduler process of the server on this host
(speedscope JSON + flamegraph SVG per TP rank), SGLang's torch profiler (Chrome traces under
OUT/torch), and the overlay's phase-timing window (`GET /spec_timing`, after a reset). Writes
OUT/summary.md and OUT/summary.json. Exit 0: all collected; 1: something missing (named at the end);
2: unusable input (nothing done); 130: interrupted (what was collected is written).
"""
from __future__ import annotations

import argparse
import sys

from sglang_patches.cliargs import OneLineParser, finite_float
from sglang_patches.errors import UserError


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="sglang-patches profile", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    p.add_argument("--url", required=True, help="the SGLang server, e.g. http://127.0.0.1:30000")
    p.add_argument("--seconds", type=finite_float, default=10.0, help="length of the window (default: %(default)s)")
    p.add_argument("--out", required=True, metavar="DIR", help="new (or empty) output directory")
    p.add_argument("--native", action="store_true", help="py-spy --native: include C/C++ frames")
    p.add_argument("--rate", type=int, default=100, metavar="HZ", help="py-spy samples per second (default: %(default)s)")
    p.add_argument("--no-torch-profiler", action="store_true", help="skip SGLang's /start_profile window")
    p.add_argument("--no-py-spy", action="store_true", help="skip py-spy")
    p.add_argument("--activities", default="CPU,GPU", help="torch profiler activities (default: %(default)s)")
    p.add_argument("--top", type=int, default=15, help="functions listed per rank (default: %(default)s)")
    p.add_argument("--api-key", default=None,
                   help="bearer token if the server was started with --admin-api-key / --api-key")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from sglang_patches.profiling.session import profile_server

    if not 0 < args.seconds <= 86400:
        raise UserError(f"--seconds {args.seconds:g}: must be > 0 and at most 86400 (one day)")
    if args.top < 1:
        raise UserError(f"--top {args.top}: must be at least 1")
    activities = [a.strip().upper() for a in args.activities.split(",") if a.strip()]
    bad = sorted(set(activities) - {"CPU", "GPU", "MEM", "RPD"})
    if bad:
        raise UserError(f"--activities: unknown {', '.join(bad)}; choose from CPU, GPU, MEM, RPD")
    result = profile_server(args.url, args.seconds, args.out, native=args.native, rate=args.rate,
                            torch_profiler=not args.no_torch_profiler, py_spy=not args.no_py_spy,
                            activities=activities, api_key=args.api_key, top=args.top)
    out = sys.stderr
    out.write(f"wrote {result['files']['markdown']} and {result['files']['json']}\n")
    for note in result["notes"]:
        out.write(f"note: {note}\n")
    if result["problems"]:
        out.write(f"sglang-patches: profile PARTIAL ({len(result['problems'])} problem(s)):\n")
        for p in result["problems"]:
            out.write(f"  - {p}\n")
    return result["exit_code"]
