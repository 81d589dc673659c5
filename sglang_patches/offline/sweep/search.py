"""`--search`: measure a small design, fit the cost model, predict the rest of the grid, measure only
the predicted best configurations (at most `--search-top` per batch size, and no more speculative
configurations in all than the budget: a third of the grid's by default), and record predicted vs
measured in DIR/search.json (the predictions come from the design-only fit, so the chosen rows are
out of sample). With --replay the search's picks are also compared with the whole grid's best.
"""
from __future__ import annotations

import statistics
import sys
from pathlib import Path

from sglang_patches.whatif import cost_model as cm
from sglang_patches.offline.sweep import results as res
from sglang_patches.whatif.grid import Plan, config_name


def best_per_bs(rows: list[dict]) -> dict[int, dict]:
    """Per batch size: the fastest ok row overall (the baseline included) and the fastest speculative one."""
    out: dict[int, dict] = {}
    for r in res.latest_rows(rows).values():
        if r.get("status") != "ok" or not r.get("tok_s"):
            continue
        d = out.setdefault(int(r["batch_size"]), {})
        keys = ("overall", "speculative") if r.get("spec") else ("overall",)
        for k in keys:
            if k not in d or r["tok_s"] > d[k]["tok_s"]:
                d[k] = {"config": r["config"], "tok_s": r["tok_s"]}
    return out


def versus_grid(search_rows: list[dict], grid_rows: list[dict]) -> list[dict]:
    """The search's pick against the grid's best, per batch size, for the best overall and the best
    speculative configuration (ratio = grid tok/s of the search's pick / grid's best tok/s, so both
    sides use the same measurement)."""
    picks, best = best_per_bs(search_rows), best_per_bs(grid_rows)
    grid_tok = {(r["config"], int(r["batch_size"])): r["tok_s"]
                for r in res.latest_rows(grid_rows).values() if r.get("status") == "ok"}
    out = []
    for bs in sorted(best):
        for kind in ("overall", "speculative"):
            p, g = picks.get(bs, {}).get(kind), best[bs].get(kind)
            if not p or not g:
                continue
            tok = grid_tok.get((p["config"], bs), p["tok_s"])
            out.append({"batch_size": bs, "kind": kind, "search_pick": p["config"], "grid_best": g["config"],
                        "ratio": tok / g["tok_s"], "within_3pct": tok >= 0.97 * g["tok_s"]})
    return out


def model_error_on_grid(models: dict, grid_rows: list[dict], design: list[str]) -> dict:
    """The design-only models against every measured grid row outside the design (what a search
    cannot see): median and largest |predicted / measured - 1|."""
    rows = [r for r in res.latest_rows(grid_rows).values() if r["config"] not in set(design)]
    errs = sorted(abs(c["error"]) for c in cm.compare(models, rows))
    if not errs:
        return {"rows": 0}
    return {"rows": len(errs), "median_abs_error": statistics.median(errs), "max_abs_error": errs[-1]}


def run_search(plan: Plan, out_dir: str | Path, run, per_bs: int = 2, budget: int | None = None,
               out=None, grid_rows: list[dict] | None = None) -> dict:
    """`run(configs)` measures configurations (runner.run_configs bound to its options).
    `budget`: speculative configurations to measure in all, the design's included (default: a third
    of the grid's, at least the design). `grid_rows` (a replayed grid): also compare the picks and
    the model with the whole grid (`versus_grid`, `model_error_on_grid` in the summary)."""
    out = out or sys.stdout
    design = cm.design(plan)
    n_spec, n_design = len(plan.speculative), sum(1 for c in design if c is not None)
    budget = cm.search_budget(plan, budget)
    print(f"sglang-patches sweep: search: budget {budget} of the grid's {n_spec} speculative configurations; "
          f"measuring the design {', '.join(map(config_name, design))}", file=out, flush=True)
    run(design)
    design_names = {config_name(c) for c in design}
    rows = [r for r in res.read_rows(out_dir) if r["config"] in design_names]
    models = cm.fit_all(rows)
    base = {"design": [config_name(c) for c in design], "per_bs": per_bs, "budget": budget,
            "grid_speculative": n_spec}
    if not models:
        summary = {**base, "chosen": [], "predictions": [], "compare": [], "measured_speculative": n_design,
                   "error": "no design row has phase timing; cannot fit (are the speculative configs failing?)"}
        res.write_json(Path(out_dir) / res.SEARCH, summary)
        print(f"sglang-patches sweep: search: {summary['error']}", file=out, flush=True)
        return summary
    # every config already run, failed ones too: a failed one is not retried (and not counted twice)
    measured = design_names | {r["config"] for r in res.read_rows(out_dir)}
    chosen = cm.pick_next(models, plan.speculative, measured, per_bs, limit=budget - n_design)
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
    picks = best_per_bs(all_rows)
    for bs, p in sorted(picks.items()):
        print(f"sglang-patches sweep: search: bs {bs}: pick {p['overall']['config']}", file=out, flush=True)
    summary = {**base, "chosen": [c.name for c in chosen], "measured_speculative": n_design + len(chosen),
               "models": {str(bs): m.to_dict() for bs, m in models.items()},
               "predictions": cm.predictions(models, plan.configs), "compare": comparison,
               "picks": {str(bs): p for bs, p in picks.items()}}
    if grid_rows is not None:
        summary["versus_grid"] = versus_grid(all_rows, grid_rows)
        summary["model_error_on_grid"] = model_error_on_grid(models, grid_rows, summary["design"])
    res.write_json(Path(out_dir) / res.SEARCH, summary)
    return summary
