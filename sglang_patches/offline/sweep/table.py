"""Sweep report: DIR/summary.md (a table per batch size, sorted by tok/s, ratio to the baseline of the
same batch size; the best configuration per batch size; failed and skipped rows; predicted vs
measured for --search) and the PNGs of `plots.py`. `write_report(DIR)` works from results.jsonl
(plus DIR/logs/, for old rows' steady-decode columns), so `sglang-patches sweep --report-only
--out DIR` regenerates everything.
"""
from __future__ import annotations

import sys
from pathlib import Path

from sglang_patches.errors import UserError
from sglang_patches.offline.sweep import results as res
from sglang_patches.offline.sweep.stalls import stall_lines, with_stalls
from sglang_patches.offline.decode_log import MIN_STEADY_WINDOWS

SUMMARY = "summary.md"


def _f(x, fmt=".1f", dash="-"):
    return dash if x is None else format(x, fmt)


def _pct(x):
    return "-" if x is None else f"{100 * x:.0f}%"


def split_rows(rows: list[dict]) -> tuple[dict[int, list[dict]], list[dict]]:
    """({bs: ok rows, one per config}, failed rows whose (config, bs) has no ok row)."""
    ok: dict[int, list[dict]] = {}
    failed = []
    for (_, bs), r in sorted(res.latest_rows(rows).items(), key=lambda kv: (kv[0][1], kv[0][0])):
        if r.get("status") == "ok":
            ok.setdefault(bs, []).append(r)
        else:
            failed.append(r)
    return ok, failed


def best_per_bs(rows: list[dict]) -> dict[int, dict]:
    """{bs: {"best": row, "baseline": row|None, "speedup": float|None}}; best = the fastest
    speculative row (ties: fewer draft tokens), speedup = its tok/s / the baseline's."""
    ok, _ = split_rows(rows)
    out = {}
    for bs, group in ok.items():
        base = next((r for r in group if r["config"] == "baseline"), None)
        spec = [r for r in group if r["config"] != "baseline"]
        if not spec:
            out[bs] = {"best": None, "baseline": base, "speedup": None}
            continue
        best = max(spec, key=lambda r: (r["tok_s"], -(r.get("spec") or {}).get("draft_tokens", 0)))
        out[bs] = {"best": best, "baseline": base,
                   "speedup": best["tok_s"] / base["tok_s"] if base and base["tok_s"] else None}
    return out


def with_steady(rows: list[dict], out_dir: str | Path) -> list[dict]:
    """Rows from before the sweep recorded steady decode get it from their server log where that
    log is still there (results.after_the_fact: DIR/logs/<name> or the row's log_path). Only
    windows stamped within the row's own measurement count: a log holds every batch size's run,
    and a resumed sweep's log starts anew. Rows measured under --profile-seconds get none."""
    from sglang_patches.offline.decode_log import steady_tok_s

    out = []
    for r in rows:
        if r.get("status") == "ok" and "steady_tok_s" not in r:
            try:
                found = res.after_the_fact(r, out_dir, "logs", "log_path", ".log")
                if found:   # the server log's stamps are local wall-clock time, without a zone
                    path, (start, end) = found
                    between = (start.replace(tzinfo=None), end.replace(tzinfo=None))
                    r = {**r, **steady_tok_s(str(path), int(r["batch_size"]), between=between)}
            except (UserError, OSError, ValueError, KeyError, TypeError, ArithmeticError):
                pass   # no date or measure_s, an unreadable log: the row stays without a steady reading
        out.append(r)
    return out


def steady_best_lines(rows: list[dict]) -> list[str]:
    """The best configuration per batch size again, by steady decode tok/s (server logs)."""
    ok, _ = split_rows(rows)
    lines = []
    for bs, group in sorted(ok.items()):
        base = next((r for r in group if r["config"] == "baseline" and r.get("steady_tok_s")), None)
        all_spec = [r for r in group if r["config"] != "baseline"]
        spec = [r for r in all_spec if r.get("steady_tok_s")]
        if base and spec:
            best = max(spec, key=lambda r: r["steady_tok_s"])
            among = "" if len(spec) == len(all_spec) else (
                f" (only {len(spec)} of {len(all_spec)} configurations had {MIN_STEADY_WINDOWS} steady windows; "
                "longer outputs give more)")
            lines.append(f"bs {bs}, steady decode: best {best['config']} at {best['steady_tok_s']:.1f} tok/s = "
                         f"{best['steady_tok_s'] / base['steady_tok_s']:.2f}x the baseline's "
                         f"{base['steady_tok_s']:.1f} tok/s{among}")
    return lines


def disagreement_lines(rows: list[dict]) -> list[str]:
    """Where the end-to-end and the steady-decode readings of a batch size give opposite answers (speculate or
    not), which one to act on."""
    ok, _ = split_rows(rows)
    lines = []
    for bs, b in sorted(best_per_bs(rows).items()):
        base = next((r for r in ok.get(bs, []) if r["config"] == "baseline" and r.get("steady_tok_s")), None)
        every = [r for r in ok.get(bs, []) if r["config"] != "baseline"]
        spec = [r for r in every if r.get("steady_tok_s")]
        if b.get("speedup") is None or not base or not spec:
            continue
        steady = max(spec, key=lambda r: r["steady_tok_s"])
        ratio = steady["steady_tok_s"] / base["steady_tok_s"]
        if (b["speedup"] > 1) != (ratio > 1):
            lines.append(f"bs {bs}: the two readings disagree ({b['best']['config']} {b['speedup']:.2f}x end to end, "
                         f"{steady['config']} {ratio:.2f}x steady): end to end counts these runs' prefills and the batch "
                         "filling and draining; a long-running server's decode is the steady reading, act on it"
                         + ("" if len(spec) == len(every) else f" once it covers more than {len(spec)} of {len(every)} "
                            "configurations (a larger --max-new-tokens)"))
    return lines


def best_lines(rows: list[dict]) -> list[str]:
    lines = []
    for bs, b in sorted(best_per_bs(rows).items()):
        if b["best"] is None:
            lines.append(f"bs {bs}: no speculative configuration succeeded")
        elif b["speedup"] is None:
            lines.append(f"bs {bs}: best {b['best']['config']} at {b['best']['tok_s']:.1f} tok/s (no baseline row)")
        else:
            verdict = "speculation wins" if b["speedup"] > 1 else "the baseline is faster"
            lines.append(f"bs {bs}: best {b['best']['config']} at {b['best']['tok_s']:.1f} tok/s = "
                         f"{b['speedup']:.2f}x the baseline's {b['baseline']['tok_s']:.1f} tok/s ({verdict})")
    return lines


def _table(group: list[dict]) -> list[str]:
    base = next((r for r in group if r["config"] == "baseline"), None)
    steady = any(r.get("steady_tok_s") for r in group)
    head = ("| config | steps | topk | draft tok | tok/s | x baseline | tok/s/req | accept len | "
            "draft | verify | extend | host gap | cycle p50 ms | tok/s repeats |"
            + (" steady tok/s | steady x baseline |" if steady else ""))
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in sorted(group, key=lambda r: -r["tok_s"]):
        spec = r.get("spec") or {}
        sh = r.get("phase_shares") or {}
        p50 = r.get("phases_p50_ms") or {}
        ratio = r["tok_s"] / base["tok_s"] if base and base["tok_s"] else None
        reps = " ".join(f"{x:.0f}" for x in r.get("tok_s_repeats") or [])
        lines.append(f"| {r['config']} | {spec.get('steps', '-')} | {spec.get('topk', '-')} | "
                     f"{spec.get('draft_tokens', '-')} | {r['tok_s']:.1f} | {_f(ratio, '.2f')} | "
                     f"{_f(r.get('tok_s_per_request'))} | {_f(r.get('accept_length'), '.2f')} | "
                     f"{_pct(sh.get('draft'))} | {_pct(sh.get('verify'))} | {_pct(sh.get('extend'))} | "
                     f"{_pct(sh.get('host_gap'))} | {_f(p50.get('cycle'), '.2f')} | {reps} |")
        if steady:
            b = (base or {}).get("steady_tok_s")
            x = r["steady_tok_s"] / b if b and r.get("steady_tok_s") else None
            lines[-1] += f" {_f(r.get('steady_tok_s'))} | {_f(x, '.2f')} |"
    return lines


def _search_section(search: dict) -> list[str]:
    lines = ["## Search (cost model)", "",
             f"Measured design: {', '.join(search.get('design', []))}; then the predicted best: "
             f"{', '.join(search.get('chosen', [])) or 'none new'}.", "",
             "Predictions come from the fit on the design rows only (`fit` = a design row, in sample).", "",
             "| bs | config | predicted tok/s | measured tok/s | error | |", "|---|---|---|---|---|---|"]
    if search.get("budget"):
        lines[2:2] = [f"Measured {search.get('measured_speculative')} of the grid's {search.get('grid_speculative')} "
                      f"speculative configurations (budget {search['budget']}) plus the baseline.", ""]
    for c in search.get("compare", []):
        lines.append(f"| {c['batch_size']} | {c['config']} | {c['predicted']:.1f} | {c['measured']:.1f} | "
                     f"{100 * c['error']:+.1f}% | {'fit' if c.get('in_sample') else ''} |")
    if search.get("versus_grid"):
        lines += ["", f"Against the whole grid (replayed from `{search.get('replayed_from')}`; ratio = the grid's tok/s "
                  "of the search's pick / the grid's best):", "",
                  "| bs | best | search pick | grid best | ratio | within 3 % |", "|---|---|---|---|---|---|"]
        for v in search["versus_grid"]:
            lines.append(f"| {v['batch_size']} | {v['kind']} | {v['search_pick']} | {v['grid_best']} | "
                         f"{v['ratio']:.3f} | {'yes' if v['within_3pct'] else 'NO'} |")
        err = search.get("model_error_on_grid") or {}
        if err.get("rows"):
            lines += ["", f"The design-only model against the {err['rows']} grid rows outside the design: "
                      f"median |error| {100 * err['median_abs_error']:.1f} %, largest {100 * err['max_abs_error']:.1f} %."]
    if search.get("error"):
        lines.append(f"\nSearch stopped: {search['error']}")
    return lines + [""]


def render_markdown(rows: list[dict], plan: dict | None = None, search: dict | None = None,
                    pngs: list[str] | None = None, stalls: dict | None = None) -> str:
    ok, failed = split_rows(rows)
    first = rows[0] if rows else {}
    lines = ["# EAGLE-3 sweep", ""]
    commands = sorted({r["command"] for r in rows if r.get("command")})
    if len(commands) > 1:  # merged shards (or a sweep resumed with other flags): every command, not the first
        lines.append(f"- Commands ({len(commands)}; rows merged into one sweep):")
        lines += [f"  - `{c}`" for c in commands]
    for key, label in (("command", "Command"), ("sglang_version", "SGLang"), ("gpu", "GPU"),
                       ("target", "Target"), ("draft", "Drafter"), ("simulate_acc_len", "SGLANG_SIMULATE_ACC_LEN")):
        if first.get(key) not in (None, "") and not (key == "command" and len(commands) > 1):
            lines.append(f"- {label}: `{first[key]}`")
    if first:
        lines += [f"- max new tokens {first.get('max_new_tokens')}, repeats {first.get('repeats')}, "
                  f"date of first row {first.get('date')}", ""]
    lines += ["## Best configuration per batch size", ""] + [f"- {x}" for x in best_lines(rows) + steady_best_lines(rows)
                                                                   + disagreement_lines(rows)]
    lines.append("")
    for bs in sorted(ok):
        lines += [f"## Batch size {bs}", "", *(_table(ok[bs])), ""]
    lines.append("Phase columns: share of GPU cycle time (timer p50 for cycle ms); accept length "
                 "includes the bonus token; tok/s = median of the repeats, end to end (prefill, ramp-up "
                 "and the batch's tail included). Steady columns, where present: decode alone, from the "
                 "server's own 'Decode batch' lines at #running-req = bs (n x mean accept len / median "
                 "cycle time over windows with no prefill between; blank with fewer than 2 windows).")
    lines.append("")
    lines += stall_lines(stalls or {}, rows)
    if search:
        lines += _search_section(search)
    if failed:
        lines += ["## Failed", "", "| config | bs | reason | log |", "|---|---|---|---|"]
        lines += [f"| {r['config']} | {r['batch_size']} | {r.get('reason')} | {r.get('log_path')} |" for r in failed]
        lines.append("")
    skipped = (plan or {}).get("skipped") or []
    if skipped:
        lines += ["## Skipped grid points", "", "| steps | topk | draft tok | reason |", "|---|---|---|---|"]
        lines += [f"| {s['steps']} | {s['topk']} | {s['draft_tokens']} | {s['reason']} |" for s in skipped]
        lines.append("")
    for p in pngs or []:
        lines.append(f"![{p}]({p})")
    return "\n".join(lines).rstrip() + "\n"


def write_report(out_dir: str | Path, out=None) -> dict:
    """Write summary.md and the PNGs from DIR/results.jsonl; print the best lines. Returns paths."""
    out, out_dir = out or sys.stdout, Path(out_dir)
    rows = res.read_rows(out_dir)
    if not rows:
        raise UserError(f"{out_dir / res.RESULTS} is missing or holds no rows; run a sweep into --out {out_dir} first")
    rows = with_steady(rows, out_dir)
    plan = res.read_object(out_dir / res.PLAN, "sweep plan")
    search = res.read_object(out_dir / res.SEARCH, "search summary")
    try:  # render once before writing anything: a malformed plan.json/search.json is refused here
        render_markdown(rows, plan, search)
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise UserError(f"{out_dir}: plan.json or search.json has unexpected content ({type(err).__name__}: "
                        f"{str(err)[:80]}); delete them and rerun, or rerun the sweep") from None
    pngs = []
    try:
        from sglang_patches.offline.sweep import plots
        pngs = plots.write_pngs(split_rows(rows)[0], out_dir)
    except ImportError:
        print("sglang-patches sweep: warning: matplotlib is not installed; PNGs skipped "
              "(pip install matplotlib; from the source tree: pip install -e '.[report]')", file=sys.stderr)
    md = render_markdown(rows, plan, search, [Path(p).name for p in pngs], with_stalls(rows, out_dir))
    res.write_text_atomic(out_dir / SUMMARY, md)
    for line in best_lines(rows) + steady_best_lines(rows) + disagreement_lines(rows):
        print(line, file=out)
    print(f"wrote {out_dir / SUMMARY}" + "".join(f", {p}" for p in pngs), file=out)
    return {"summary": str(out_dir / SUMMARY), "pngs": pngs}
