"""What a run of benchmarks/adaptive_bench.py shows: its table, and what `advise --adaptive-config`
predicted for the run's `ours` configs beside what the cells measured.

Each `ours_SET` config (format 2) holds, per bucket, SGLang's slot replayed on the s5 log's cycles with
the file's entry and with SGLang's default entry, each priced at the advisor's cycle costs
(`sglang_slot_replay.tok_s`, `default_slot_replay.tok_s`: sglang_patches/offline/adaptive_sets.py).
A cell at concurrency C is read against bucket C: with the servers' `--cuda-graph-bs-decode 1 2 4 8`
a concurrency-8 cell runs mostly full batches of 8 (bucket 8), and its drain runs smaller ones (bucket 1),
which this leaves out. A config of format 1, or a bucket without those figures, gives None.
"""
from __future__ import annotations


def _bucket(config: dict | None, key: int) -> dict:
    meta = (config or {}).get("sglang_patches") or {}
    return next((b for b in meta.get("buckets", ()) if b.get("bucket") == key), {})


def predicted(configs: dict, sets, concurrency) -> dict:
    """{"predicted_ours_vs_default_SET_bsC": the replay's ratio, "predicted_tok_s": {"ours_SET_bsC": ...,
    "default_SET_bsC": ...}} (None where the config lacks them)."""
    out: dict = {"predicted_tok_s": {}}
    for pset in sets:
        for bs in concurrency:
            b = _bucket(configs.get(f"ours_{pset}"), bs)
            ours = (b.get("sglang_slot_replay") or {}).get("tok_s")
            default = (b.get("default_slot_replay") or {}).get("tok_s")
            out["predicted_tok_s"][f"ours_{pset}_bs{bs}"] = ours
            out["predicted_tok_s"][f"default_{pset}_bs{bs}"] = default
            out[f"predicted_ours_vs_default_{pset}_bs{bs}"] = round(ours / default, 4) if ours and default else None
    return out


def table(summary: dict) -> str:
    """Tok/s per row and cell, then the ratios (advise's predicted one last) and goals."""
    from adaptive_summary import CONCURRENCY, ROWS, SETS, cell_name  # imports this module: not at the top
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
