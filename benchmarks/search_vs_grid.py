"""A live `sweep --search` against a measured grid of the same plan, on CPU.

    python benchmarks/search_vs_grid.py --search SEARCH_DIR --grid GRID_DIR [--summary SUMMARY.json]

SEARCH_DIR: the output of `sglang-patches sweep ... --search --out SEARCH_DIR` (search.json and its
results.jsonl); GRID_DIR: a full grid of the same configurations and batch sizes
(`sglang-patches sweep ... --out GRID_DIR`, possibly over several `--resume`d calls). For each batch
size the search's pick is compared with the grid's best by the grid's own tok/s of both (the same
measurement on both sides: `sweep.search.versus_grid`, which `--search --replay` uses too), overall
(no speculation may win) and among speculative configurations. Prints a table; with `--summary` the
keys search_pick_ratio_bs<B> (overall pick / grid best), search_configs_measured,
search_grid_speculative and search_vs_grid (every row) are written into that JSON file (which must
exist: the issue's summary.json); other keys stay.
"""
from __future__ import annotations

import json
import os
import sys

from sglang_patches.cliargs import OneLineParser, refuse_output_on_input
from sglang_patches.errors import UserError, exit_with
from sglang_patches.offline.sweep import results as res
from sglang_patches.offline.sweep.search import versus_grid


def compare(search_dir: str, grid_dir: str) -> dict:
    for flag, d in (("--search", search_dir), ("--grid", grid_dir)):
        if not os.path.isdir(d):
            raise UserError(f"{flag} {d}: no such directory; give a sweep output directory")
    path = os.path.join(search_dir, res.SEARCH)
    if not os.path.isfile(path):
        raise UserError(f"--search {search_dir}: no {res.SEARCH}; give the --out of a `sweep --search` run")
    search = _read_json_object(path, "rerun the search or restore the file")
    search_rows, grid_rows = res.read_rows(search_dir), res.read_rows(grid_dir)
    if not grid_rows:
        raise UserError(f"--grid {grid_dir}: no rows in {res.RESULTS}; give the directory of a measured grid")
    grid_ok = {(r["config"], int(r["batch_size"])) for r in grid_rows if r.get("status") == "ok"}
    missing = sorted({(r["config"], int(r["batch_size"])) for r in search_rows if r.get("status") == "ok"} - grid_ok)
    rows = versus_grid(search_rows, grid_rows)
    if not rows:
        raise UserError(f"--search {search_dir} and --grid {grid_dir} share no batch size with ok rows; "
                        "compare a search and a grid of the same plan")
    overall = {r["batch_size"]: r for r in rows if r["kind"] == "overall"}
    return {"search_pick_ratio": {bs: r["ratio"] for bs, r in sorted(overall.items())},
            "search_configs_measured": search.get("measured_speculative"),
            "search_grid_speculative": search.get("grid_speculative"),
            "search_budget": search.get("budget"),
            "search_vs_grid": rows,
            # a pick the grid never measured is compared with the search's own tok/s (another run)
            "search_rows_not_in_grid": [f"{c} bs {b}" for c, b in missing]}


def _read_json_object(path: str, fix: str) -> dict:
    try:
        with open(path) as fh:
            obj = json.load(fh)
    except ValueError as exc:
        raise UserError(f"{path} is not JSON ({exc}); {fix}") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read it ({exc.strerror}); {fix}") from None
    if not isinstance(obj, dict):
        raise UserError(f"{path} holds a JSON {type(obj).__name__}, not an object; {fix}")
    return obj


def main(argv=None) -> int:
    ap = OneLineParser(prog="search_vs_grid.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--search", required=True, metavar="SEARCH_DIR")
    ap.add_argument("--grid", required=True, metavar="GRID_DIR")
    ap.add_argument("--summary", metavar="SUMMARY_JSON", help="write the search_* keys into this existing JSON file")
    import figure_cli  # benchmarks/, beside this script
    figure_cli.declare(ap, figure="live sweep --search on trained-8b vs the grid",
                       folder="2026-12-01-trained-8b", duration="seconds, CPU only (reads two sweep folders)")
    try:
        args = ap.parse_args(argv)
        if args.dry_run:
            return figure_cli.dry_run(out=args.summary or "stdout", reads=[args.search, args.grid])
        if args.summary:
            refuse_output_on_input(args.summary, "--summary", [
                ("--search", args.search), ("--search", os.path.join(args.search, res.SEARCH)),
                ("--search", os.path.join(args.search, res.RESULTS)), ("--grid", args.grid),
                ("--grid", os.path.join(args.grid, res.RESULTS))])
            if not os.path.isfile(args.summary):
                raise UserError(f"--summary {args.summary}: no such file; give the issue's existing summary.json")
        out = compare(args.search, args.grid)
        if args.summary:
            summary = _read_json_object(args.summary, "give the issue's summary.json (a JSON object)")
            for key in [k for k in summary if k.startswith("search_pick_ratio_bs")]:
                summary[key] = None  # a batch size this comparison lacks: no figure from another run stays
            summary.update({f"search_pick_ratio_bs{bs}": ratio for bs, ratio in out["search_pick_ratio"].items()})
            summary.update({k: out[k] for k in ("search_configs_measured", "search_grid_speculative",
                                                "search_budget", "search_vs_grid", "search_rows_not_in_grid")})
            # the sweep's atomic write: never a half-written summary; a one-line UserError if it cannot
            res.write_text_atomic(args.summary, json.dumps(summary, indent=1) + "\n")
    except UserError as err:
        exit_with(err, "search_vs_grid")
    print("| bs | kind | search pick | grid best | ratio | within 3 % |")
    print("|---|---|---|---|---|---|")
    for r in out["search_vs_grid"]:
        print(f"| {r['batch_size']} | {r['kind']} | {r['search_pick']} | {r['grid_best']} | {r['ratio']:.3f} "
              f"| {'yes' if r['within_3pct'] else 'no'} |")
    print(f"search measured {out['search_configs_measured']} of {out['search_grid_speculative']} speculative "
          f"configurations (budget {out['search_budget']})")
    if out["search_rows_not_in_grid"]:
        print("not in the grid (compared with the search's own tok/s): " + ", ".join(out["search_rows_not_in_grid"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
