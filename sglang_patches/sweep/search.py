"""`--search`: measure a small design, fit the cost model, predict the rest of the grid, measure only
the predicted best `per_bs` configurations per batch size, and record predicted vs measured in
DIR/search.json (the predictions come from the design-only fit, so the chosen rows are out of sample).
"""
from __future__ import annotations

import sys
from pathlib import Path

from sglang_patches.sweep import cost_model as cm
from sglang_patches.sweep import results as res
from sglang_patches.sweep.grid import Plan, config_name


def run_search(plan: Plan, out_dir: str | Path, run, per_bs: int = 2, out=None) -> dict:
    """`run(configs)` measures configurations (runner.run_configs bound to its options)."""
    out = out or sys.stdout
    design = cm.design(plan)
    print(f"sglang-patches sweep: search: measuring the design {', '.join(map(config_name, design))}",
          file=out, flush=True)
    run(design)
    design_names = {config_name(c) for c in design}
    rows = [r for r in res.read_rows(out_dir) if r["config"] in design_names]
    models = cm.fit_all(rows)
    if not models:
        summary = {"design": sorted(design_names), "chosen": [], "predictions": [], "compare": [],
                   "error": "no design row has phase timing; cannot fit (are the speculative configs failing?)"}
        res.write_json(Path(out_dir) / res.SEARCH, summary)
        print(f"sglang-patches sweep: search: {summary['error']}", file=out, flush=True)
        return summary
    measured = {r["config"] for r in res.read_rows(out_dir) if r.get("status") == "ok"}
    chosen = cm.pick_next(models, plan.speculative, measured, per_bs)
    for bs, m in sorted(models.items()):
        top = ", ".join(f"{c.name} {p:.0f}" for p, c in cm.ranked(m, plan.speculative)[:per_bs])
        print(f"sglang-patches sweep: search: bs {bs}: predicted best {top} tok/s "
              f"(baseline {m.baseline_tok_s or 0:.0f})", file=out, flush=True)
    if chosen:
        run(chosen)
    all_rows = res.read_rows(out_dir)
    comparison = cm.compare(models, list(res.latest_rows(all_rows).values()))
    for c in comparison:
        c["in_sample"] = c["config"] in design_names
    summary = {"design": [config_name(c) for c in design], "chosen": [c.name for c in chosen],
               "per_bs": per_bs, "models": {str(bs): m.to_dict() for bs, m in models.items()},
               "predictions": cm.predictions(models, plan.configs), "compare": comparison}
    res.write_json(Path(out_dir) / res.SEARCH, summary)
    return summary
