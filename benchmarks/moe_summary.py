"""The summary of the steps sweep on the MoE fixture: run folders and verify-cost folders folded into one
summary.json with every key (null for what did not run), and `--update`'s fold of a new
summary into an earlier one. The profiles live here too: the summary reports what each one targets.
Used by benchmarks/moe_steps_sweep.py (its `summarize` part); pure, CPU only.
"""
from __future__ import annotations

import datetime
import os

from sglang_patches.errors import UserError

FIXTURE = "qwen3-moe-shape"
PROFILES = {"strong": [0.91, 0.86, 0.80, 0.75, 0.70], "weak": [0.52, 0.42, 0.35, 0.30, 0.25]}
TARGET_ACCEPT_3_1_4 = {"strong": 3.3, "weak": 1.8}
STEPS = (1, 2, 3, 5)
BATCH_SIZES = (1, 8)
TOLERANCE = 0.02          # realised per-position rates must match the requested within this
MIN_REQUEST_CYCLES = 2000
PATTERN_VERIFY_SHARE = 0.5  # "verify dominating": verify at least half of every speculative cycle


def _read(path: str, what: str, fix: str) -> dict:
    from sglang_patches.offline.sweep.results import read_object

    return read_object(path, what, fix) or {}   # the callers checked that the file is there


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _ok_rows(run_dir: str) -> list[dict]:
    from sglang_patches.offline.sweep import results as res
    from sglang_patches.offline.sweep.table import with_steady

    from sglang_patches.offline.sweep.stalls import with_stalls

    rows = [r for r in res.latest_rows(res.read_rows(run_dir)).values() if r.get("status") == "ok"]
    rows = with_steady(rows, run_dir)   # steady decode from the server logs, where a row lacks it
    stalls = with_stalls(rows, run_dir)   # prefill stalls from the timing logs (one-off compilation)
    return [{**r, "prefill_stalls": stalls.get((r["config"], int(r["batch_size"])))} for r in rows]


def sweep_table(rows: list[dict]) -> dict:
    """{bs: {config: {...}}} with tok/s, speedup over the baseline, accept length and verify share."""
    out: dict = {}
    base = {r["batch_size"]: r["tok_s"] for r in rows if r["config"] == "baseline"}
    steady_base = {r["batch_size"]: r.get("steady_tok_s") for r in rows if r["config"] == "baseline"}
    for r in rows:
        bs = r["batch_size"]
        shares = r.get("phase_shares") or {}
        p50 = r.get("phases_p50_ms") or {}
        b = base.get(bs)
        out.setdefault(str(bs), {})[r["config"]] = {
            "steps": (r.get("spec") or {}).get("steps"), "tok_s": r["tok_s"],
            "speedup": r["tok_s"] / b if b else None, "accept_length": r.get("accept_length"),
            "verify_share": shares.get("verify"), "draft_share": shares.get("draft"),
            "extend_share": shares.get("extend"), "verify_ms_p50": p50.get("verify"),
            "cycle_ms_p50": p50.get("cycle"), "cond_rates": r.get("cond_rates"),
            # decode alone, from the server's log (no prefill, ramp or tail): see offline/sweep/table.py
            "steady_tok_s": r.get("steady_tok_s"), "steady_windows": r.get("steady_windows"),
            "prefill_stalls": r.get("prefill_stalls"),
            "steady_speedup": (r["steady_tok_s"] / steady_base[bs]
                               if r.get("steady_tok_s") and steady_base.get(bs) else None)}
    return out


def best_config(table: dict, bs: int, steady: bool = False) -> dict | None:
    """The fastest speculative configuration by end-to-end tok/s, or by steady decode tok/s."""
    tok, speed = ("steady_tok_s", "steady_speedup") if steady else ("tok_s", "speedup")
    cells = table.get(str(bs)) or {}
    spec = {k: v for k, v in cells.items() if k != "baseline" and v.get(tok)}
    if not spec:
        return None
    name = max(spec, key=lambda k: spec[k][tok])
    best = spec[name]
    base = cells.get("baseline")
    out = {"config": name, "steps": best["steps"], "tok_s": best[tok], "speedup": best.get(speed),
           "baseline_tok_s": None if base is None else base.get(tok), "accept_length": best["accept_length"],
           "verify_share": best["verify_share"],
           "baseline_faster": None if best.get(speed) is None else best[speed] < 1.0}
    if steady:   # the best of those with a steady reading (a configuration needs 2 windows at bs)
        out["configs_with_reading"] = [len(spec), sum(1 for k in cells if k != "baseline")]
    return out


def verify_bound_pattern(table: dict, bs: int) -> dict | None:
    """The verify-bound pattern: fewer steps better (tok/s falls as steps grow) and verify ~95 % of the cycle."""
    cells = {k: v for k, v in (table.get(str(bs)) or {}).items() if k != "baseline" and v.get("steps")}
    if len(cells) < 2:
        return None
    by_steps = sorted(cells.values(), key=lambda v: v["steps"])
    tok = [v["tok_s"] for v in by_steps]
    shares = [v["verify_share"] for v in by_steps if v["verify_share"] is not None]
    return {"tok_s_by_steps": {str(v["steps"]): v["tok_s"] for v in by_steps},
            "verify_share_by_steps": {str(v["steps"]): v["verify_share"] for v in by_steps},
            "best_steps": by_steps[max(range(len(tok)), key=tok.__getitem__)]["steps"],
            "fewer_steps_better": all(a >= b for a, b in zip(tok, tok[1:])),
            "verify_dominates": bool(shares) and min(shares) >= PATTERN_VERIFY_SHARE,
            "verify_share_min": min(shares) if shares else None}


def summarize(run_dirs: list[str], verify_cost_dirs: list[str] | None) -> dict:
    from sglang_patches.vocab.rates import accept_length

    out: dict = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                 "fixture": FIXTURE, "profiles": {}, "rate_check": {}, "rate_max_abs_error": None,
                 "verify_over_step_moe": None, "verify_over_step_dense": None}
    for name, rates in PROFILES.items():
        out["profiles"][name] = {"rates": rates, "accept_length_at_3_1_4": round(accept_length(rates[:3]), 4),
                                 "target_accept_length_at_3_1_4": TARGET_ACCEPT_3_1_4[name]}
    errors = []
    for d in run_dirs:
        for name in PROFILES:
            path = os.path.join(d, f"rates-{name}.json")
            if os.path.isfile(path):
                check = _read(path, "rate check", "rerun `moe_steps_sweep.py rates`")
                if check.get("max_abs_error") is not None and not _number(check["max_abs_error"]):
                    raise UserError(f"rate check {path}: max_abs_error must be a number or null; rerun "
                                    "`moe_steps_sweep.py rates`")
                out["rate_check"][name] = check
                if check.get("max_abs_error") is not None:
                    errors.append(check["max_abs_error"])
            sweep_dir = os.path.join(d, f"sweep-{name}")
            if os.path.isdir(sweep_dir):
                table = sweep_table(_ok_rows(sweep_dir))
                out["profiles"][name]["sweep"] = table
                out["profiles"][name]["sweep_dir"] = sweep_dir
                for bs in BATCH_SIZES:
                    out[f"best_config_{name}_bs{bs}"] = best_config(table, bs)
                    out[f"best_config_{name}_bs{bs}_steady"] = best_config(table, bs, steady=True)
                    out[f"verify_bound_pattern_{name}_bs{bs}"] = verify_bound_pattern(table, bs)
    for name in PROFILES:
        for bs in BATCH_SIZES:
            out.setdefault(f"best_config_{name}_bs{bs}", None)
            out.setdefault(f"best_config_{name}_bs{bs}_steady", None)
            out.setdefault(f"verify_bound_pattern_{name}_bs{bs}", None)
    out["rate_max_abs_error"] = max(errors) if errors else None
    for vdir in verify_cost_dirs or []:  # one folder, one per fixture, or one per set of draft tokens
        path = os.path.join(vdir, "summary.json")
        if not os.path.isfile(path):
            raise UserError(f"--verify-cost {vdir}: no summary.json there; give the --out folder of "
                            f"benchmarks/verify_cost.py")
        vc = _read(path, "verify_cost.py summary", "rerun benchmarks/verify_cost.py")
        for key in VERIFY_TABLES:
            if vc.get(key) is not None and not (isinstance(vc[key], dict)
                                                and all(c is None or isinstance(c, dict) for c in vc[key].values())):
                raise UserError(f"--verify-cost {path}: {key} must be a table {{bs: {{draft tokens: ratio}}}}; "
                                "rerun benchmarks/verify_cost.py")
            if vc.get(key) is not None:
                out[key] = merge_cells(out[key], vc[key], key, vdir)
                out.setdefault("verify_cost_dirs", {}).setdefault(key, []).append(vdir)
                source = out.setdefault("verify_cell_source", {}).setdefault(key, {})
                for bs, cells in vc[key].items():   # which folder measured each cell (--update keeps this)
                    measured = {t: vdir for t, v in (cells if isinstance(cells, dict) else {}).items() if v is not None}
                    if measured:
                        source.setdefault(bs, {}).update(measured)
    return out


VERIFY_TABLES = ("verify_over_step_moe", "verify_over_step_dense")


def merge_cells(have: dict | None, new: dict, key: str, where: str) -> dict:
    """Join {bs: {T: ratio}} tables cell by cell (each ratio is measured within one run); a cell
    measured in two folders is refused rather than silently picked."""
    out = {bs: dict(cells) for bs, cells in (have or {}).items()}
    for bs, cells in new.items():
        row = out.setdefault(bs, {})
        for t, v in (cells if isinstance(cells, dict) else {}).items():
            if v is None:
                row.setdefault(t, None)
            elif row.get(t) is not None:
                raise UserError(f"--verify-cost {where}: {key} bs {bs} T={t} was measured in two folders; "
                                f"give each measurement once")
            else:
                row[t] = v
    return out


def _merge_table(old: dict, new: dict) -> dict:
    """{bs: {T: value}} tables merged cell by cell: new non-null cells win, a null one keeps the old
    cell; rows that are not objects (a hand-edited summary) are skipped."""
    out = {bs: dict(cells) for bs, cells in old.items() if isinstance(cells, dict)}
    for bs, cells in new.items():
        if isinstance(cells, dict):
            row = out.setdefault(bs, {})
            row.update({t: v for t, v in cells.items() if v is not None or t not in row})
    return out


def update_summary(old: dict, new: dict) -> dict:
    """Fold a new summary into an earlier one: new non-null values win, null ones keep the earlier value,
    keys only the earlier one has (notes, commands) stay; `profiles` and `rate_check` merge per profile;
    the verify-cost tables merge cell by cell (a run of other draft tokens adds to the earlier cells), and
    `verify_cell_source` says which folder measured each cell.
    rate_max_abs_error is recomputed over the merged rate checks (and any earlier value)."""
    out = dict(old)
    for key, value in new.items():
        if key in VERIFY_TABLES and isinstance(old.get(key), dict) and isinstance(value, dict):
            # cell by cell: a later run of other draft tokens adds its cells; a re-measured cell wins
            out[key] = _merge_table(old[key], value)
        elif key == "verify_cell_source" and isinstance(old.get(key), dict) and isinstance(value, dict):
            table = lambda x: x if isinstance(x, dict) else {}  # noqa: E731
            out[key] = {k: _merge_table(table(old[key].get(k)), table(v)) for k, v in {**old[key], **value}.items()}
        elif key == "verify_cost_dirs" and isinstance(old.get(key), dict) and isinstance(value, dict):
            lists = lambda x: x if isinstance(x, list) else []  # noqa: E731
            out[key] = {k: list(dict.fromkeys([*lists(old[key].get(k)), *lists(v)]))
                        for k, v in {**old[key], **value}.items()}
        elif key in ("profiles", "rate_check") and isinstance(old.get(key), dict) and isinstance(value, dict):
            merged = dict(old[key])
            for name, part in value.items():
                merged[name] = ({**merged[name], **part} if isinstance(merged.get(name), dict)
                                and isinstance(part, dict) else part)
            out[key] = merged
        elif value is not None:
            out[key] = value
    errors = [c.get("max_abs_error") for c in (out.get("rate_check") or {}).values() if isinstance(c, dict)]
    errors = [e for e in errors if _number(e)]   # a hand-edited "0.01" is left out, never compared
    if errors:
        out["rate_max_abs_error"] = max(errors)
    return out


def format_summary(s: dict) -> str:
    """The console table; what a hand-edited summary lacks shows as '-' rather than a traceback."""
    def num(x, fmt):
        return format(x, fmt) if isinstance(x, (int, float)) else "-"

    lines = []
    for name in PROFILES:
        table = ((s.get("profiles") or {}).get(name) or {}).get("sweep") or {}
        for bs in BATCH_SIZES:
            cells = table.get(str(bs))
            if not isinstance(cells, dict) or not cells:
                lines.append(f"{name} bs {bs}: not run")
                continue
            lines.append(f"{name} bs {bs}:   config        tok/s  speedup  accept  verify share  steady x")
            rows = sorted(((cfg, c) for cfg, c in cells.items() if isinstance(c, dict)),
                          key=lambda kv: kv[1].get("steps") or 0)
            for cfg, c in rows:
                share = c.get("verify_share")
                lines.append(f"  {cfg:<18}{num(c.get('tok_s'), '.1f'):>9}{num(c.get('speedup'), '.2f'):>9}"
                             f"{num(c.get('accept_length'), '.2f'):>8}"
                             f"{(num(100 * share, '.0f') + ' %') if isinstance(share, (int, float)) else '-':>14}"
                             f"{num(c.get('steady_speedup'), '.2f'):>10}")
            best = s.get(f"best_config_{name}_bs{bs}")
            if isinstance(best, dict):
                lines.append(f"  best: {best.get('config')} x{num(best.get('speedup'), '.2f')}")
            steady = s.get(f"best_config_{name}_bs{bs}_steady")
            if isinstance(steady, dict):
                lines.append(f"  best in steady decode: {steady.get('config')} x{num(steady.get('speedup'), '.2f')}")
    for name, check in (s.get("rate_check") or {}).items():
        if isinstance(check, dict):
            lines.append(f"rate check {name}: {check.get('request_cycles', '-')} request-cycles, max |realised - "
                         f"requested| = {check.get('max_abs_error', '-')} (within {TOLERANCE}: "
                         f"{check.get('within_tolerance', '-')})")
    return "\n".join(lines)
