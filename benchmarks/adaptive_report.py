"""What a run of benchmarks/adaptive_bench.py shows: its summary.json (adaptive_summary.summarize) as one
table: tok/s per cell, the measured ratios beside advise's predicted one (adaptive_summary.predicted), and
the goals."""
from __future__ import annotations

from adaptive_summary import CONCURRENCY, ROWS, SETS, cell_name


def table(summary: dict) -> str:
    """Tok/s per row and cell, then the ratios (advise's predicted one last) and goals."""
    cols = [(s, b) for s in SETS for b in CONCURRENCY]
    lines = [f"{'tok/s':<20}" + "".join(f"{s + ' bs' + str(b):>11}" for s, b in cols)]
    for row in ROWS:
        vals = [summary["tok_s"].get(cell_name(row, s, b)) for s, b in cols]
        lines.append(f"{row:<20}" + "".join(f"{v:>11.1f}" if v else f"{'-':>11}" for v in vals))
    for key in ("ours_vs_default", "ours_vs_best_fixed", "ours_vs_plain", "default_vs_plain", "zero_vs_plain",
                "predicted_ours_vs_default"):
        vals = [summary.get(f"{key}_{s}_bs{b}") for s, b in cols]
        label = "ours_vs_def (pred.)" if key.startswith("predicted") else key
        lines.append(f"{label:<20}" + "".join(f"{v:>10.3f}x" if v else f"{'-':>11}" for v in vals))
    best = summary.get("best_fixed", {})
    lines.append(f"{'best fixed':<20}" + "".join(f"{(best.get(f'{s}_bs{b}') or {}).get('row') or '-':>11}"
                                                for s, b in cols))
    lines.append(f"records_steps_match_fraction {summary.get('records_steps_match_fraction')} over "
                 f"{summary.get('records_steps_match_records')} records; switch path consistent: "
                 f"{summary.get('switch_path_consistent')}")
    if summary.get("ratios_left_out_across_builds"):
        lines.append("ratios left out (another trained-8b build, so another drafter): "
                     + "; ".join(summary["ratios_left_out_across_builds"]))
    for name, val in summary["goals"].items():
        lines.append(f"goal {name}: {val}")
    return "\n".join(lines) + "\n"
