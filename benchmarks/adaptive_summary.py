"""Pure parts of benchmarks/adaptive_bench.py (no GPU, no server): the measurement plan, the cells
already measured in an output folder (resume), bench_serving's result line, adaptive-config handling,
the records-vs-SGLang checks of a timing log, and summary.json with its goals.

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
import re
import statistics
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
GRAPH_BS = (1, 2, 4, 8)
GOALS = {"ours_vs_default_min": 0.99, "ours_vs_default_ood_bs1_min": 1.05, "ours_vs_best_fixed_min": 0.98}
SWITCH_LINE = re.compile(r"Switch adaptive runtime state: steps (\d+) -> (\d+)")


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


def records_in_window(lines, window: tuple[float, float]) -> list[str]:
    """Lines of a timing log whose record started within `window` (other lines dropped)."""
    lo, hi = window
    keep = []
    for ln in lines:
        try:
            t = json.loads(ln).get("t")
        except (ValueError, AttributeError):
            continue
        if isinstance(t, (int, float)) and lo <= t <= hi:
            keep.append(ln if ln.endswith("\n") else ln + "\n")
    return keep


# ---------------------------------------------------------------- adaptive configs

def load_adaptive_config(path: str | None) -> dict:
    """The config as SGLang reads it (its own loader; None = its built-in default)."""
    from sglang.srt.speculative.adaptive_spec_params import _load_adaptive_config

    cfg, _ = _load_adaptive_config(path)
    return json.loads(json.dumps(cfg))


def buckets(cfg: dict) -> dict[int, list[int]]:
    return {int(k): sorted(set(v["candidate_steps"])) for k, v in cfg.items() if k.isdigit()}


def candidates_for_bs(cfg: dict, bs: int, graph_bs=GRAPH_BS) -> list[int]:
    """Candidate steps of the bucket SGLang routes a batch of `bs` to: padded up to the next CUDA-graph
    batch size (unchanged past the largest), then the largest bucket key <= that (else the smallest)."""
    table = buckets(cfg)
    padded = next((g for g in sorted(graph_bs) if g >= bs), bs)
    keys = sorted(table)
    below = [k for k in keys if k <= padded]
    return table[below[-1] if below else keys[0]]


def initial_steps(cfg: dict) -> int:
    """--speculative-num-steps for an adaptive server: the largest positive candidate. SGLang (0.5.17)
    sets --speculative-num-draft-tokens to steps + 1 and sizes the shared logits buffer of its CUDA
    graphs from that starting state; a candidate above it then fails at start ("shared logits buffer
    holds 32 rows but caller needs 64", seen on the H200 with its built-in config started at steps 3).
    SGLang refuses 0 steps at launch, so a config without positive candidates is refused here."""
    steps = sorted({s for c in buckets(cfg).values() for s in c})
    positive = [s for s in steps if s > 0]
    if not positive:
        raise ValueError("adaptive config has no positive candidate steps; serve it without speculation instead")
    return positive[-1]


# ---------------------------------------------------------------- timing-log checks

def decode_records(lines, t_from: float = 0.0, rank: int = 0) -> list[dict]:
    """Decode-cycle records of one rank in cycle order, read leniently (a record the project's strict
    reader would reject, e.g. accepted > steps, is exactly what the steps check must see)."""
    recs = []
    for ln in lines:
        try:
            r = json.loads(ln)
        except ValueError:
            continue
        if (isinstance(r, dict) and r.get("schema") == "sglang_patches.spec_timing" and r.get("kind") == "decode"
                and r.get("rank", 0) == rank and isinstance(r.get("t"), (int, float)) and r["t"] >= t_from):
            recs.append(r)
    recs.sort(key=lambda r: r.get("cycle", 0))
    return recs


def switch_states(log_text: str) -> list[int]:
    """SGLang's own sequence of runtime states from its 'Switch adaptive runtime state' lines
    (info level, rank 0): [from of the first switch, to of each switch]."""
    pairs = [(int(a), int(b)) for a, b in SWITCH_LINE.findall(log_text)]
    return [pairs[0][0]] + [b for _, b in pairs] if pairs else []


def _is_subsequence(short: list[int], long: list[int]) -> bool:
    it = iter(long)
    return all(any(x == y for y in it) for x in short)


def record_problem(r: dict, cands: list[int]) -> str | None:
    """Why a record's steps cannot be what ran (None = consistent with SGLang's state)."""
    steps, acc = r.get("steps"), r.get("accepted") or []
    if steps not in cands:
        return "steps not a candidate of its bucket"
    if any((not isinstance(a, int)) or a < 0 or a > steps for a in acc):
        return "accepted > steps"
    if (steps == 0) != (r.get("draft_ms") is None):
        return "draft phase presence disagrees with steps"
    if "plain" in r and r["plain"] != (steps == 0):  # v2 records mark the cycles that drafted nothing
        return "plain flag disagrees with steps"
    if steps > 0 and r.get("draft_tokens") != steps + 1:
        return "draft_tokens != steps + 1"
    return None


def steps_check(records: list[dict], cfg: dict, log_text: str, graph_bs=GRAPH_BS) -> dict:
    """Do the records' steps match what SGLang ran? Per record: its steps are a candidate of the bucket
    SGLang routes its batch size to, no request accepted more drafts than those steps, a draft phase
    was timed exactly when steps > 0, and draft_tokens = steps + 1 (topk 1). Over the log: the runs of
    equal steps in the records follow SGLang's own switch sequence (a subsequence: a switch made after
    a verify can be undone by the next batch's bucket before any cycle runs)."""
    problems: dict[str, int] = {}
    ok = 0
    runs: list[int] = []
    by_steps: dict[int, list[float]] = {}
    for r in records:
        p = record_problem(r, candidates_for_bs(cfg, int(r.get("bs", 0)), graph_bs))
        if p is None:
            ok += 1
        else:
            problems[p] = problems.get(p, 0) + 1
        if not runs or runs[-1] != r.get("steps"):
            runs.append(r.get("steps"))
        if isinstance(r.get("draft_ms"), (int, float)):
            by_steps.setdefault(r.get("steps"), []).append(r["draft_ms"])
    states = switch_states(log_text)
    if len(runs) <= 1:
        path_ok = len(states) == 0 or (bool(runs) and states[-1] == runs[0])
    else:
        path_ok = bool(states) and _is_subsequence(runs, states) and states[-1] == runs[-1]
    return {"records": len(records), "records_ok": ok, "fraction": ok / len(records) if records else None,
            "problems": problems, "record_steps_runs": len(runs), "sglang_switches": max(len(states) - 1, 0),
            "switch_path_consistent": path_ok,
            "steps_seen": sorted({r.get("steps") for r in records if isinstance(r.get("steps"), int)}),
            "draft_ms_p50_by_steps": {str(k): round(statistics.median(v), 4) for k, v in sorted(by_steps.items())}}


def counts_check(records: list[dict], requests: list[dict]) -> dict:
    """Records against SGLang's per-request counters over the same requests: request-cycles in the
    records (entries of `accepted`) = sum of meta_info spec_verify_ct; and the phases of each full
    decode record fit in its cycle (draft + verify + extend <= cycle, a few us of rounding allowed)."""
    req_cycles = sum(len(r.get("accepted") or []) for r in records)
    verify_ct = sum(int(q.get("spec_verify_ct") or 0) for q in requests)
    ratios, within = [], 0
    full = [r for r in records if all(isinstance(r.get(k), (int, float)) for k in ("verify_ms", "extend_ms", "cycle_ms"))
            and r.get("cycle_ms", 0) > 0]
    for r in full:
        s = (r.get("draft_ms") or 0.0) + r["verify_ms"] + r["extend_ms"]
        ratios.append(s / r["cycle_ms"])
        within += s <= r["cycle_ms"] * 1.001 + 0.01
    ratios.sort()
    return {"requests": len(requests), "record_request_cycles": req_cycles, "spec_verify_ct_sum": verify_ct,
            "records_equal_verify_ct": req_cycles == verify_ct and verify_ct > 0,
            "decode_records": len(records), "records_with_all_phases": len(full),
            "phases_within_cycle_fraction": within / len(full) if full else None,
            "phases_share_of_cycle_p50": round(ratios[len(ratios) // 2], 4) if ratios else None,
            "phases_share_of_cycle_min": round(ratios[0], 4) if ratios else None}


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
