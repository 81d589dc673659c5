"""One configuration on two servers: the cells of two adaptive_bench --out folders side by side.

A row's cells measure one server each. Two folders that ran the same cases on the same `trained-8b`
build (the same warm machine) give the spread between servers of one configuration, cell by cell:
tok/s and bench_serving's accept length of B over A. A ratio between rows inside a folder that is
smaller than this spread is not resolved by one run.

    python benchmarks/adaptive_spread.py OUT_A OUT_B [--out spread.json]

Cells are paired by name (ROW_SET_bsN) when both are usable, measured with the same prompts and
length, on the same recorded build, as two measurements (not a copy), and for `ours` with the same
adaptive config in both folders; anything else is named and left out.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import adaptive_summary as asum  # noqa: E402


def read_cells(out: Path, tag: str, left_out: list[str]) -> dict[str, dict]:
    """Usable cells by name; each unusable one is named in left_out."""
    cells = {}
    for f in sorted((out / "cells").glob("*.json")):
        try:
            cell = json.loads(f.read_text())
        except (OSError, ValueError) as exc:
            left_out.append(f"{f.stem}: unreadable in {tag} ({type(exc).__name__})")
            continue
        problem = asum.cell_problem(cell)
        if problem is None:
            cells[f.stem] = cell
        else:
            left_out.append(f"{f.stem}: unusable in {tag} ({problem})")
    return cells


def _config(out: Path, pset: str) -> dict | None:
    """`ours`'s adaptive config of one set, SGLang's keys only (each folder writes its own from its log)."""
    try:
        cfg = json.loads((out / "configs" / f"ours_{pset}.json").read_text())
    except (OSError, ValueError):
        return None
    return {k: v for k, v in cfg.items() if k.isdigit()}


def pair(a: dict[str, dict], b: dict[str, dict], dirs=None) -> tuple[list[dict], list[str]]:
    rows, left_out = [], []
    for name in sorted(set(a) | set(b)):
        ca, cb = a.get(name), b.get(name)
        if ca is None or cb is None:
            left_out.append(f"{name}: only in {'B' if ca is None else 'A'}")
            continue
        differs = [k for k in ("fixture_build", "num_prompts", "output_len") if ca.get(k) != cb.get(k)]
        if differs:
            left_out.append(f"{name}: {', '.join(differs)} differ ({', '.join(f'{ca.get(k)} vs {cb.get(k)}' for k in differs)})")
            continue
        if not ca.get("fixture_build"):
            left_out.append(f"{name}: no fixture_build recorded, so not known to be one drafter")
            continue
        if (ca.get("t0"), ca.get("t1")) == (cb.get("t0"), cb.get("t1")):
            left_out.append(f"{name}: the same measurement in both (a copied folder?)")
            continue
        cfg_a = _config(dirs[0], ca["set"]) if ca.get("row") == "ours" and dirs else None
        if ca.get("row") == "ours" and (cfg_a is None or cfg_a != _config(dirs[1], ca["set"])):
            left_out.append(f"{name}: ours ran another adaptive config in each folder (or one is missing)")
            continue
        ra, rb = ca["result"], cb["result"]
        acc = (rb["accept_length"] / ra["accept_length"]) if ra.get("accept_length") and rb.get("accept_length") else None
        rows.append({"cell": name, "tok_s_a": ra["output_throughput"], "tok_s_b": rb["output_throughput"],
                     "tok_s_ratio": round(rb["output_throughput"] / ra["output_throughput"], 4),
                     "accept_ratio": None if acc is None else round(acc, 4)})
    return rows, left_out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a", help="an adaptive_bench --out folder")
    ap.add_argument("b", help="another one, the same cases on the same build")
    ap.add_argument("--out", dest="dst", default=None, help="write the pairs as JSON here")
    import figure_cli  # benchmarks/, beside this script
    figure_cli.declare(ap, figure='one configuration on two servers (the spread row of adaptive-fixed-build)', folder='2026-12-03-adaptive-fixed-build',
                       duration='seconds, CPU only (reads two adaptive_bench --out folders)')
    args = ap.parse_args(argv)
    if args.dry_run:
        return figure_cli.dry_run(out=args.dst or "stdout", reads=[f"A: {args.a}/cells/*.json", f"B: {args.b}/cells/*.json"])
    a, b = Path(args.a), Path(args.b)
    if a.resolve() == b.resolve():
        print(f"{a}: given twice; pass two folders", file=sys.stderr)
        return 2
    cells, unusable = {}, []
    for name, out in (("A", a), ("B", b)):
        cells[name] = read_cells(out, name, unusable)
        if not cells[name]:
            print(f"{out}: no usable cells/*.json; pass an adaptive_bench --out folder", file=sys.stderr)
            return 2
    if args.dst and any(Path(args.dst).resolve().is_relative_to(o.resolve()) for o in (a, b)):
        print(f"--out {args.dst}: inside a folder it reads; write it elsewhere", file=sys.stderr)
        return 2
    if args.dst and not Path(args.dst).resolve().parent.is_dir():
        print(f"--out {args.dst}: its folder does not exist", file=sys.stderr)
        return 2
    rows, left_out = pair(cells["A"], cells["B"], (a, b))
    left_out = unusable + left_out
    for line in left_out:
        print(f"left out: {line}", file=sys.stderr)
    if not rows:
        print("no cell measured in both folders as two measurements of one configuration (the left-out lines say why)", file=sys.stderr)
        return 2
    for r in rows:
        acc = "-" if r["accept_ratio"] is None else f"{r['accept_ratio']:.3f}x"
        print(f"{r['cell']:18s} {r['tok_s_a']:8.1f} -> {r['tok_s_b']:8.1f} tok/s  {r['tok_s_ratio']:.3f}x  accept {acc}")
    worst = max(rows, key=lambda r: abs(math.log(r["tok_s_ratio"])))  # 0.95x is a wider spread than 1.05x
    print(f"largest tok/s spread: {worst['cell']} {worst['tok_s_ratio']:.3f}x over {len(rows)} paired cells")
    if args.dst:
        Path(args.dst).write_text(json.dumps({"a": str(a), "b": str(b), "pairs": rows, "left_out": left_out},
                                             indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
