"""Pure parts of benchmarks/adaptive_bench.py (no GPU, no server): the measurement plan, the cells
already measured in an output folder (resume), bench_serving's result line and summary.json with its
goals. Adaptive-config handling: adaptive_configs.py; the records-vs-SGLang checks of a timing log:
adaptive_log_checks.py.

A cell is one (row, prompt set, concurrency) measurement: rows `plain` (no speculation), `s1`-`s5`
(fixed EAGLE3 steps, topk 1), `default` (`--speculative-adaptive`, SGLang's built-in config), `ours`
(`--speculative-adaptive-config` written by `sglang-patches advise --adaptive-config` from the `s5`
row's timing log of the same prompt set) and `zero` (an adaptive server whose buckets up to 32 are [0];
64: [1], the start SGLang needs, never reached at batch <= 8: SGLang's steps-0 cycles). Each cell is saved as OUT/cells/ROW_SET_bsN.json once
measured; a later run skips it. Ratios are taken only between cells of one `trained-8b` build. The table:
adaptive_report.py."""
from __future__ import annotations

import json
import math
from pathlib import Path

SETS = ("in", "ood")
CONCURRENCY = (1, 8)
FIXED = {"s1": 1, "s2": 2, "s3": 3, "s4": 4, "s5": 5}  # s1: the lowest chain of SGLang's bs-1 default
ROWS = ("plain", *FIXED, "default", "ours", "zero")
ZERO_CONFIG = {"1": [0], "8": [0], "32": [0], "64": [1]}
# A server start ("case") serves some cells; `ours` needs one server per prompt set (its config comes
# from that set's traffic).
CASES = {**{name: [(name, s) for s in SETS] for name in ("plain", *FIXED, "default", "zero")},
         "ours_in": [("ours", "in")], "ours_ood": [("ours", "ood")]}
CASE_ORDER = ("plain", "s5", "ours_ood", "ours_in", "default", "s3", "s4", "s2", "s1", "zero")
# Graph batch sizes every server captures (also SGLang's adaptive routing pads a batch to these).
GOALS = {"ours_vs_default_min": 0.99, "ours_vs_default_ood_bs1_min": 1.05, "ours_vs_best_fixed_min": 0.98}


def cell_name(row: str, pset: str, bs: int) -> str:
    return f"{row}_{pset}_bs{bs}"


def case_cells(case: str) -> list[tuple[str, str, int]]:
    return [(row, pset, bs) for row, pset in CASES[case] for bs in CONCURRENCY]


def parse_case_list(text: str) -> list[str]:
    """`--cases` value: a comma list of CASES names, in the order to run."""
    names = [x.strip() for x in text.split(",") if x.strip()]
    bad = [n for n in names if n not in CASES]
    if bad or not names:
        raise ValueError(f"--cases {text!r}: unknown {', '.join(bad) or '(empty)'}; choose from {', '.join(CASES)}")
    if len(set(names)) != len(names):
        raise ValueError(f"--cases {text!r} names a case twice")
    return names


# ---------------------------------------------------------------- prompts

def sharegpt_conversations(prompts: list[str], tag: str) -> list[dict]:
    """The ShareGPT shape bench_serving's `sharegpt` loader reads: two turns, the first is the prompt;
    the second only sets a length when --sharegpt-output-len is not given (it always is here)."""
    return [{"id": f"{tag}-{i}", "conversations": [{"from": "human", "value": p}, {"from": "gpt", "value": "pass"}]}
            for i, p in enumerate(prompts)]


# ---------------------------------------------------------------- cells and resume

def parse_bench_result(text: str) -> dict:
    """The last JSON line bench_serving appended to its --output-file (one line per run)."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        raise ValueError("bench_serving wrote no result line")
    obj = json.loads(lines[-1])
    keep = ("output_throughput", "completed", "total_output_tokens", "duration", "accept_length",
            "median_itl_ms", "median_ttft_ms", "mean_tpot_ms", "max_concurrency", "request_throughput")
    return {k: obj.get(k) for k in keep}


def cell_problem(cell, num_prompts: int | None = None, output_len: int | None = None) -> str | None:
    """Why a saved cell cannot be used (None = usable)."""
    if not isinstance(cell, dict):
        return "not a JSON object"
    res = cell.get("result")
    if not isinstance(res, dict):
        return "no result"
    tps = res.get("output_throughput")
    if not isinstance(tps, (int, float)) or isinstance(tps, bool) or not math.isfinite(tps) or tps <= 0:
        return f"output_throughput {tps!r} is not a positive number"
    want = num_prompts if num_prompts is not None else cell.get("num_prompts")
    if res.get("completed") != want:
        return f"completed {res.get('completed')!r} of {want!r} requests"
    if output_len is not None and cell.get("output_len") != output_len:
        return f"measured at output length {cell.get('output_len')!r}, not {output_len}"
    return None


def load_cells(out: Path, num_prompts: dict[int, int], output_len: int) -> dict[str, dict]:
    """Usable saved cells by name; a cell measured with other prompt counts or lengths is not reused."""
    cells = {}
    for row in ROWS:
        for pset in SETS:
            for bs in CONCURRENCY:
                name = cell_name(row, pset, bs)
                try:
                    cell = json.loads((out / "cells" / f"{name}.json").read_text())
                except (OSError, ValueError):
                    continue
                if cell_problem(cell, num_prompts[bs], output_len) is None:
                    cells[name] = cell
    return cells


def missing_cells(case: str, cells: dict) -> list[tuple[str, str, int]]:
    return [c for c in case_cells(case) if cell_name(*c) not in cells]


def set_window(cells: dict, row: str, pset: str) -> tuple[float, float] | None:
    """Wall-clock span of a row's cells of one prompt set (their warm-up included), for cutting
    that traffic out of the server's timing log; None unless every concurrency was measured by the
    same server (same timing log)."""
    got = [cells.get(cell_name(row, pset, bs)) for bs in CONCURRENCY]
    if any(c is None for c in got) or len({c.get("timing_log") for c in got}) != 1:
        return None
    return min(c["t0"] for c in got), max(c["t1"] for c in got)


# ---------------------------------------------------------------- summary and goals

def _tps(cells: dict, row: str, pset: str, bs: int):
    c = cells.get(cell_name(row, pset, bs))
    return c["result"]["output_throughput"] if c else None


def _ratio(a, b):
    return round(a / b, 4) if a is not None and b else None


def _build(cells: dict, row: str, pset: str, bs: int):
    """The `trained-8b` build a cell measured (its build id; None if not recorded). Cells of two ids
    compare two drafters, not two configs; a fixed-work rebuild of the same weights has the same id."""
    return (cells.get(cell_name(row, pset, bs)) or {}).get("fixture_build")


def _vs(cells: dict, a: str, b: str, pset: str, bs: int, across: list):
    """Row a's tok/s over row b's in one cell; None, and the pair named in `across`, when they
    measured different builds."""
    ta, tb = _tps(cells, a, pset, bs), _tps(cells, b, pset, bs)
    if ta is not None and tb is not None and _build(cells, a, pset, bs) != _build(cells, b, pset, bs):
        across.append(f"{cell_name(a, pset, bs)} ({_build(cells, a, pset, bs)}) vs "
                      f"{cell_name(b, pset, bs)} ({_build(cells, b, pset, bs)})")
        return None
    return _ratio(ta, tb)


def _at_least(values: list, floor: float, *, complete: bool = True):
    """True only if every value was measured, complete, and >= floor; False if any measured one is
    below; None (not shown) otherwise."""
    if any(v is not None and v < floor for v in values):
        return False
    if not values or any(v is None for v in values) or not complete:
        return None
    return True


# advise's predicted figures for `ours`: each `ours_SET` config (format 2) holds, per bucket, SGLang's slot
# replayed on the s5 log's cycles with the file's entry and with SGLang's default entry, each priced at the
# advisor's cycle costs (`sglang_slot_replay.tok_s`, `default_slot_replay.tok_s`:
# sglang_patches/offline/adaptive_sets.py). A cell at concurrency C is read against bucket C: with the servers'
# `--cuda-graph-bs-decode 1 2 4 8` a concurrency-8 cell runs mostly full batches of 8 (bucket 8), and its drain
# runs smaller ones (bucket 1), which this leaves out. A config of format 1, or a bucket without those figures,
# gives None.

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


def summarize(cells: dict, *, configs: dict, steps_checks: dict, counts_checks: dict, meta: dict) -> dict:
    out: dict = {"tok_s": {}, "accept_length": {}}
    for row in ROWS:
        for pset in SETS:
            for bs in CONCURRENCY:
                name = cell_name(row, pset, bs)
                out["tok_s"][name] = _tps(cells, row, pset, bs)
                c = cells.get(name)
                out["accept_length"][name] = c["result"].get("accept_length") if c else None
    vs_default, vs_best, best, across = [], [], {}, []
    grid_complete = True
    for pset in SETS:
        for bs in CONCURRENCY:
            fixed = {name: _tps(cells, name, pset, bs) for name in FIXED}
            measured = {k: v for k, v in fixed.items() if v is not None}
            top = max(measured, key=measured.get) if measured else None
            best[f"{pset}_bs{bs}"] = {"row": top, "tok_s": measured.get(top), "grid_complete": len(measured) == len(fixed)}
            d = _vs(cells, "ours", "default", pset, bs, across)
            same = {k: v for k, v in measured.items() if _build(cells, k, pset, bs) == _build(cells, "ours", pset, bs)}
            complete = len(same) == len(fixed)  # ours against the fixed grid of its own build
            grid_complete &= complete
            b = _ratio(_tps(cells, "ours", pset, bs), max(same.values())) if same else None
            out[f"ours_vs_default_{pset}_bs{bs}"] = d
            out[f"ours_vs_best_fixed_{pset}_bs{bs}"] = b
            out[f"ours_vs_plain_{pset}_bs{bs}"] = _vs(cells, "ours", "plain", pset, bs, across)
            out[f"default_vs_plain_{pset}_bs{bs}"] = _vs(cells, "default", "plain", pset, bs, across)
            out[f"zero_vs_plain_{pset}_bs{bs}"] = _vs(cells, "zero", "plain", pset, bs, across)
            vs_default.append(d)
            vs_best.append((b, complete))
    out["best_fixed"] = best
    out.update(predicted(configs, SETS, CONCURRENCY))  # advise's own replay ratios, beside the measured ones
    out["fixture_builds"] = sorted({c.get("fixture_build") or "not recorded" for c in cells.values()})
    out["ratios_left_out_across_builds"] = across
    fracs = [c for c in steps_checks.values() if c.get("records") and "error" not in c]
    n = sum(c["records"] for c in fracs)
    out["records_steps_match_fraction"] = (round(sum(c["records_ok"] for c in fracs) / n, 6) if n else None)
    out["records_steps_match_records"] = n
    out["switch_path_consistent"] = (all(c["switch_path_consistent"] for c in fracs) if fracs else None)
    out["steps_checks"] = steps_checks
    eq = [c.get("records_equal_verify_ct") for c in counts_checks.values() if c]
    out["records_equal_spec_verify_ct_all"] = all(eq) if eq else None
    ph = [c.get("phases_within_cycle_fraction") for c in counts_checks.values() if c]
    out["phases_within_cycle_all"] = (all(x == 1.0 for x in ph) if ph and None not in ph else None)
    out["counts_checks"] = counts_checks
    out["goals"] = {
        "ours_ge_0.99x_default_every_cell": _at_least(vs_default, GOALS["ours_vs_default_min"]),
        "ours_ge_1.05x_default_ood_bs1": _at_least([out["ours_vs_default_ood_bs1"]],
                                                   GOALS["ours_vs_default_ood_bs1_min"]),
        "ours_ge_0.98x_best_fixed_every_cell": _at_least([b for b, _ in vs_best], GOALS["ours_vs_best_fixed_min"],
                                                         complete=grid_complete),
        "records_steps_match_all": (None if out["records_steps_match_fraction"] is None
                                    else out["records_steps_match_fraction"] == 1.0 and bool(out["switch_path_consistent"])),
    }
    out["goals_note"] = ("true = every needed cell measured and the bound holds; false = a measured cell misses it; "
                         "null = not measured, or measured on different trained-8b builds (ratios_left_out_across_builds), "
                         "or the fixed grid incomplete while no measured cell misses it")
    out["configs"] = configs
    out["cells_measured"] = sorted(cells)
    out["cells_missing"] = [cell_name(r, s, b) for r in ROWS for s in SETS for b in CONCURRENCY
                            if cell_name(r, s, b) not in cells]
    out["commands"] = {name: {"server": c.get("server_cmd"), "client": c.get("client_cmd")} for name, c in sorted(cells.items())}
    out.update(meta)
    return out
