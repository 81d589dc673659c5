"""Pure parts of benchmarks/fp8_draft_bench.py (no GPU, no server): the case plan and each case's flags,
the drafter's weight bytes per draft phase (roofline), the copy bandwidth, and summary.json merged from
one or more runs' JSON files, with its goals.

    python benchmarks/fp8_draft_summary.py RUN.json|DIR ... --out summary.json   # DIR: every fp8_draft_run_*.json in it

Cases: FIXTURE:CONFIG for the timing fixtures (llama3-8b, kimi-k2-shape: dummy weights, draft-phase GPU
ms only) and trained-8b:sS:CONFIG (real acceptance, steps S). A case measured in several inputs: the one
that finished last wins, except that a failed case never replaces a measured one (said in `merged`).
"""
from __future__ import annotations

import argparse
import datetime
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fp8_roofline import (SCALE_BYTES, copy_bandwidth, draft_forwards_per_phase, drafter_matrices,  # noqa: E402,F401
                          drafter_weight_bytes, roofline_fraction)
from fp8_variants import (DEFAULT_W8A8, FP8_INPUTS_ENV, VARIANT_W8A8, W8A8_LINE, w8a8_named,  # noqa: E402,F401
                          a8lm_stands_in_at_bs1, default_view, gu_stands_in, ran_as)

CONFIGS = {  # drafter configuration -> the drop-in launcher's flags for it
    "stock": ["--draft-backend", "sglang"],
    "sglang_fp8": ["--draft-backend", "sglang", "--speculative-draft-model-quantization", "fp8"],
    "triton_bf16": ["--draft-backend", "triton"],
    "triton_fp8": ["--draft-backend", "triton", "--draft-weights", "fp8"],
    "triton_fp8_wo": ["--draft-backend", "triton", "--draft-weights", "fp8-weight-only"],  # the A/B baseline
    # fp8 inputs named through fp8_weights.FP8_INPUTS_ENV in the server's environment (CASE_ENV): gate_up
    # alone (the default of --draft-weights fp8 since 2026-12-04), and gate_up with the lm_head (the default before)
    "triton_fp8_gu": ["--draft-backend", "triton", "--draft-weights", "fp8"],
    "triton_fp8_a8lm": ["--draft-backend", "triton", "--draft-weights", "fp8"],
}
# extra server environment per config: each by-name variant's fp8-input set, as the server's knob spells it
CASE_ENV = {c: {FP8_INPUTS_ENV: ",".join(sorted(mods))} for c, mods in VARIANT_W8A8.items()}
WEIGHTS = {"stock": "bf16", "sglang_fp8": "sglang_fp8", "triton_bf16": "bf16", "triton_fp8": "fp8", "triton_fp8_wo": "fp8",
           "triton_fp8_gu": "fp8", "triton_fp8_a8lm": "fp8"}
FP8_CONFIGS = tuple(c for c in WEIGHTS if WEIGHTS[c] == "fp8")  # the triton configs whose load line names FP8 weights
# the fp8-input variants compared with the stock drafter beside triton_fp8: key infix -> config
VARIANTS = {"wo": "triton_fp8_wo", "gu": "triton_fp8_gu", "a8lm": "triton_fp8_a8lm"}
BY_NAME = ("triton_fp8_gu", "triton_fp8_a8lm")  # configs run only when named (in no fixture group, not in all)
TIMING_FIXTURES = ("llama3-8b", "kimi-k2-shape")
TRAINED = "trained-8b"
TRAINED_STEPS = (3, 5)
TRAINED_CONFIGS = ("stock", "triton_fp8")
# named cases only (not in `all` or the fixture's group): does gate_up's and the lm_head's fp8 input cost
# acceptance? (accept_ratio_wo_* = fp8-weight-only / stock, beside triton_fp8's accept_ratio_*)
TRAINED_BY_NAME = ("triton_fp8_wo",) + BY_NAME
GOALS = {"draft_vs_stock_bs1": 1.5, "draft_vs_stock_bs8_llama3_8b": 1.2, "draft_vs_sglang_fp8_bs1": 1.15,
         "accept_within": 0.02}
BACKEND_LINE = "triton draft backend on"
FALLBACK_MARKS = ("falling back", "draft-backend triton:", "(--draft-backend-fallback)")
FP8_LINE = re.compile(r"fp8 weights on (\d+) modules: ([\d.]+) MiB -> ([\d.]+) MiB read per draft (forward|step)")  # "forward": logs before fc was left out


def all_cases() -> list[str]:
    return ([f"{fx}:{c}" for fx in TIMING_FIXTURES for c in CONFIGS if c not in BY_NAME]
            + [f"{TRAINED}:s{s}:{c}" for s in TRAINED_STEPS for c in TRAINED_CONFIGS])


def parse_case(name: str) -> dict:
    parts = name.split(":")
    if len(parts) == 3 and parts[0] == TRAINED:
        return {"case": name, "fixture": TRAINED, "steps": int(parts[1][1:]), "config": parts[2], "kind": "trained"}
    return {"case": name, "fixture": parts[0], "steps": None, "config": parts[1], "kind": "timing"}


def parse_case_list(text: str) -> list[str]:
    """`--cases`: comma list of case names, fixture names (all of that fixture's cases) or `all`, in run
    order. ValueError (one line) for an unknown or repeated name."""
    known = all_cases()
    by_name = ([f"{TRAINED}:s{s}:{c}" for s in TRAINED_STEPS for c in TRAINED_BY_NAME]
               + [f"{fx}:{c}" for fx in TIMING_FIXTURES for c in BY_NAME])
    names: list[str] = []
    for item in [x.strip() for x in text.split(",") if x.strip()]:
        group = known if item == "all" else [c for c in known if c.split(":")[0] == item] or (
            [item] if item in known + by_name else [])
        if not group:
            raise ValueError(f"--cases: unknown {item!r}; give all, a fixture ({', '.join(TIMING_FIXTURES + (TRAINED,))}) "
                             f"or case names such as llama3-8b:triton_fp8, {TRAINED}:s3:stock (see --help)")
        twice = [c for c in group if c in names]
        if twice:
            raise ValueError(f"--cases {text!r} names {twice[0]} twice")
        names += group
    if not names:
        raise ValueError("--cases is empty; give all, a fixture or case names (see --help)")
    return names


def spec_flags(steps: int) -> list[str]:
    return ["--speculative-num-steps", str(steps), "--speculative-eagle-topk", "1",
            "--speculative-num-draft-tokens", str(steps + 1)]


def case_flags(case: str, steps: int) -> list[str]:
    """The drafter configuration's and speculation flags of a case (steps: the timing cases' --steps;
    a trained case carries its own)."""
    c = parse_case(case)
    return CONFIGS[c["config"]] + spec_flags(c["steps"] or steps)


def backend_proof(log_text: str, config: str, server_info: dict | None) -> dict:
    """Proof that the case ran its drafter configuration: the launcher's 'triton draft backend on ...' line
    (naming FP8 for the fp8 configs, no fp8-activation modules for triton_fp8_wo, and exactly the variant's
    VARIANT_W8A8 for triton_fp8_gu / triton_fp8_a8lm) for a triton config and no such line otherwise, no
    fallback line, and
    /server_info's speculative_draft_model_quantization fp8 exactly for sglang_fp8."""
    lines = log_text.splitlines()
    on = next((ln.strip() for ln in lines if BACKEND_LINE in ln), None)
    fallback = [ln.strip() for ln in lines if any(m in ln for m in FALLBACK_MARKS)][:3]
    quant = (server_info or {}).get("speculative_draft_model_quantization")
    why = None
    if fallback:
        why = "fallback: " + fallback[0]
    elif config.startswith("triton") and on is None:
        why = f"no '{BACKEND_LINE}' line in the server log"
    elif config.startswith("triton") and bool(FP8_LINE.search(on)) != (config in FP8_CONFIGS):
        why = "the triton line does not name FP8" if config in FP8_CONFIGS else "the triton line names FP8"
    elif config == "triton_fp8_wo" and W8A8_LINE.search(on):
        why = "the triton line names fp8-activation modules (expected --draft-weights fp8-weight-only)"
    elif config in BY_NAME and w8a8_named(on) != VARIANT_W8A8[config]:
        why = f"the triton line's fp8-activation modules are not those of {config} (its {CASE_ENV[config]})"
    elif not config.startswith("triton") and on is not None:
        why = f"a '{BACKEND_LINE}' line in a {config} server's log"
    elif server_info is None and config == "sglang_fp8":
        why = "no /server_info to show the drafter's quantization"
    elif server_info is not None and quant != ("fp8" if config == "sglang_fp8" else None):
        why = f"/server_info speculative_draft_model_quantization is {quant!r}"
    m, a8 = FP8_LINE.search(on or ""), W8A8_LINE.search(on or "")
    launcher = {"modules": int(m[1]), "mib_bf16": float(m[2]), "mib_fp8": float(m[3]),
                "w8a8_modules": a8[2] if a8 else None,  # e.g. "mlp.gate_up_proj x2, lm_head"; None: weight-only or an older log
                "per": m[4],  # "forward": fc included (logs before it was left out); "step": a draft step
                "sglang_path_for": on.split("SGLang's path for ", 1)[1] if "SGLang's path for " in on else None} if m else None
    return {"backend_on_line": on, "fallback_lines": fallback, "draft_quantization": quant,
            "launcher_fp8": launcher, "active": why is None, "active_why": why}


def phase_row(st: dict) -> dict:
    """The figures of one /spec_timing answer (the overlay's window since the last reset)."""
    ph = st.get("phases") or {}
    row = {f"{p}_ms_{k}": (ph.get(p) or {}).get(k) for p in ("draft", "verify", "extend", "cycle") for k in ("p50", "mean")}
    row.update(accept_length_timer=st.get("accept_length"), timer_cycles=(st.get("cycles") or {}).get("counted"),
               timer_mean_bs=st.get("mean_bs"))
    return row


# ---------------------------------------------------------------- merge and summary

def load_runs(paths: list[str]) -> list[tuple[str, dict]]:
    """(file, run) for every input: a run JSON file, or a folder's fp8_draft_run_*.json. ValueError names
    an input that is missing or not a run."""
    files: list[Path] = []
    for p in map(Path, paths):
        found = sorted(p.glob("fp8_draft_run_*.json")) if p.is_dir() else [p]
        if not found or not all(f.is_file() for f in found):
            raise ValueError(f"{p}: no fp8_draft_run_*.json there; give run files or folders the bench exported")
        files += found
    runs = []
    for f in files:
        try:
            run = json.loads(f.read_text())
        except (OSError, ValueError) as exc:
            raise ValueError(f"{f}: not readable JSON ({exc})") from None
        if not isinstance(run, dict) or not isinstance(run.get("cases"), dict):
            raise ValueError(f"{f}: not an fp8_draft_bench run (no 'cases' object)")
        runs.append((str(f), run))
    return runs


def merge(runs: list[tuple[str, dict]]) -> tuple[dict, dict]:
    """Cases by name over all runs: the latest-finished wins, but a failed one never replaces a measured one."""
    cases: dict[str, dict] = {}
    dup: dict[str, dict] = {}
    for src, run in runs:
        for name, c in run["cases"].items():
            c = {**c, "source": src, "fixture_build": (run.get("fixture_builds") or {}).get(c.get("fixture"))}
            old = cases.get(name)
            if old is None:
                cases[name] = c
                continue
            if bool(c.get("error")) != bool(old.get("error")):
                win = old if c.get("error") else c
            else:
                win = c if (c.get("t_end") or 0) >= (old.get("t_end") or 0) else old
            lose = old if win is c else c
            cases[name] = win
            d = dup.setdefault(name, {"dropped": []})
            d["used"], d["dropped"] = win["source"], d["dropped"] + [lose["source"]]
    return cases, dup


def _ok(c) -> bool:
    return bool(c) and not c.get("error") and bool(c.get("active"))


def _bs(cases, fixture, config, bs, key="draft_ms_p50"):
    c = cases.get(f"{fixture}:{config}")
    return ((c.get("bs") or {}).get(str(bs)) or {}).get(key) if _ok(c) else None


def _ratio(a, b):
    return round(a / b, 4) if a and b else None


def _trained(cases, steps, config):
    """A trained-8b case whose backend was proven active. Its parts (the accept pass, then the e2e
    cells one by one) are recorded as they finish, so a case that failed later (e.g. its last e2e cell
    ran past the deadline) still gives the parts that finished; the missing ones stay null."""
    c = cases.get(f"{TRAINED}:s{steps}:{config}")
    return c if bool(c) and bool(c.get("active")) else None


def _get(c, *path):
    for p in path:
        c = c.get(p) if isinstance(c, dict) else None
    return c


def verdict(values: list, test) -> dict:
    """met: every value measured and passing; not met: a measured value fails; else not measured."""
    if any(v is not None and not test(v) for v in values):
        v = "not met"
    else:
        v = "met" if values and all(v is not None for v in values) else "not measured"
    return {"verdict": v, "values": values}


def summarize(runs: list[tuple[str, dict]]) -> dict:
    runs_now, moved, dropped = default_view(runs)
    cases, dup = merge(runs_now)
    moved.update(gu_stands_in(cases))
    moved.update(a8lm_stands_in_at_bs1(cases))
    s: dict = {"default_view": moved, "default_view_dropped": dropped}
    for fx in TIMING_FIXTURES:
        k = fx.replace("-", "_")
        s[f"draft_speedup_bs1_{k}"] = _ratio(_bs(cases, fx, "stock", 1), _bs(cases, fx, "triton_fp8", 1))
        s[f"draft_speedup_bs8_{k}"] = _ratio(_bs(cases, fx, "stock", 8), _bs(cases, fx, "triton_fp8", 8))
    for fx in TIMING_FIXTURES:  # fp8 activations in gate_up / lm_head: weight-only draft p50 / fp8 draft p50
        for bs in (8, 32):
            s[f"draft_speedup_w8a8_vs_weight_only_bs{bs}_{fx.replace('-', '_')}"] = _ratio(
                _bs(cases, fx, "triton_fp8_wo", bs), _bs(cases, fx, "triton_fp8", bs))
    for v, cfg in VARIANTS.items():  # each variant against the stock drafter, as the goals' triton_fp8
        for bs in (1, 8):
            s[f"draft_speedup_{v}_bs{bs}_llama3_8b"] = _ratio(_bs(cases, "llama3-8b", "stock", bs),
                                                              _bs(cases, "llama3-8b", cfg, bs))
    s["draft_speedup_vs_sglang_fp8_bs1"] = _ratio(_bs(cases, "llama3-8b", "sglang_fp8", 1), _bs(cases, "llama3-8b", "triton_fp8", 1))
    s["draft_speedup_vs_sglang_fp8_bs1_kimi_k2_shape"] = _ratio(_bs(cases, "kimi-k2-shape", "sglang_fp8", 1),
                                                                _bs(cases, "kimi-k2-shape", "triton_fp8", 1))
    s["unpaired_builds"] = {}
    for st in TRAINED_STEPS:
        a, b = _trained(cases, st, "stock"), _trained(cases, st, "triton_fp8")
        for v, cfg in VARIANTS.items():
            wo = _trained(cases, st, cfg)
            if a and wo and _get(a, "fixture_build") == _get(wo, "fixture_build"):  # paired on one build only
                s[f"accept_ratio_{v}_trained_8b_s{st}"] = _ratio(_get(wo, "accept", "accept_length_sglang"),
                                                               _get(a, "accept", "accept_length_sglang"))
                for bs in (1, 8):
                    s[f"accept_ratio_{v}_bench_serving_bs{bs}_trained_8b_s{st}"] = _ratio(
                        _get(wo, "e2e", str(bs), "accept_length"), _get(a, "e2e", str(bs), "accept_length"))
                    s[f"e2e_ratio_{v}_bs{bs}_trained_8b_s{st}"] = _ratio(
                        _get(wo, "e2e", str(bs), "output_throughput"), _get(a, "e2e", str(bs), "output_throughput"))
        ids = [_get(c, "fixture_build") for c in (a, b)]
        if a and b and ids[0] != ids[1]:  # two builds (or one unrecorded): their acceptances do not compare
            s["unpaired_builds"][f"s{st}"] = {"stock": ids[0], "triton_fp8": ids[1]}
            a = b = None
        s[f"accept_ratio_trained_8b_s{st}"] = _ratio(_get(b, "accept", "accept_length_sglang"), _get(a, "accept", "accept_length_sglang"))
        s[f"accept_ratio_trained_8b_s{st}_timer"] = _ratio(_get(b, "accept", "accept_length_timer"), _get(a, "accept", "accept_length_timer"))
        sfx = "" if st == 3 else f"_s{st}"
        for bs in (1, 8):
            s[f"e2e_ratio_bs{bs}_trained_8b{sfx}"] = _ratio(_get(b, "e2e", str(bs), "output_throughput"),
                                                           _get(a, "e2e", str(bs), "output_throughput"))
            s[f"accept_ratio_bench_serving_bs{bs}_trained_8b_s{st}"] = _ratio(_get(b, "e2e", str(bs), "accept_length"),
                                                                             _get(a, "e2e", str(bs), "accept_length"))
    roof = {}
    for name, c in sorted(cases.items()):
        if c.get("kind") == "timing" and _ok(c):
            nbytes = _get(c, "drafter", "bytes_per_draft_phase")
            roof[name] = {bs: roofline_fraction(nbytes, v.get("draft_ms_p50"), c.get("copy_bandwidth_bytes_per_s"))
                          for bs, v in (c.get("bs") or {}).items()}
    s["roofline_fraction_bs1"] = (roof.get("llama3-8b:triton_fp8") or {}).get("1")
    s["roofline_fraction"] = roof
    s["draft_ms_p50"] = {n: {bs: v.get("draft_ms_p50") for bs, v in (c.get("bs") or {}).items()}
                         for n, c in sorted(cases.items()) if c.get("kind") == "timing"}
    s["goals"] = {
        "draft_ge_1.5x_stock_bs1_both_fixtures": verdict(
            [s["draft_speedup_bs1_llama3_8b"], s["draft_speedup_bs1_kimi_k2_shape"]], lambda v: v >= GOALS["draft_vs_stock_bs1"]),
        "draft_ge_1.2x_stock_bs8_llama3_8b": verdict(
            [s["draft_speedup_bs8_llama3_8b"]], lambda v: v >= GOALS["draft_vs_stock_bs8_llama3_8b"]),
        "draft_ge_1.15x_sglang_fp8_bs1_llama3_8b": verdict(
            [s["draft_speedup_vs_sglang_fp8_bs1"]], lambda v: v >= GOALS["draft_vs_sglang_fp8_bs1"]),
        "draft_ge_1.15x_sglang_fp8_bs1_kimi_k2_shape": verdict(
            [s["draft_speedup_vs_sglang_fp8_bs1_kimi_k2_shape"]], lambda v: v >= GOALS["draft_vs_sglang_fp8_bs1"]),
        # every count of both steps: the greedy load's and bench_serving's at each concurrency (other prompts)
        "accept_within_2pct_trained_8b_s3_s5": verdict(
            [s[f"accept_ratio{k}_trained_8b_s{st}"] for st in TRAINED_STEPS for k in ("", "_bench_serving_bs1", "_bench_serving_bs8")],
            lambda v: abs(v - 1) <= GOALS["accept_within"]),
    }
    s["goals_note"] = ("met = every value measured and within the bound; not met = a measured value misses it; not measured "
                       "= a value is missing (null). Ratios use only cases without error (trained-8b: the parts that finished "
                       "before an error, listed under partial) whose backend was proven active in the server log (stock/sglang_fp8: no triton line; triton_fp8: the line names FP8). Speedup = stock "
                       "(or sglang_fp8) draft p50 / triton_fp8 draft p50; accept ratio = triton_fp8 / stock, from SGLang's "
                       "spec_verify_ct (tokens / verifies; _timer: the overlay's) of the greedy load, _bench_serving_bsN: of bench_serving's prompts at concurrency N (the accept goal takes all three counts of both steps); e2e = bench_serving output tok/s ratio. triton_fp8 is what --draft-weights fp8 runs now (fp8 inputs on gate_up "
                       "alone): each run's triton_fp8 is read by its load line before the merge, so one of the earlier default (gate_up and the lm_head) counts as triton_fp8_a8lm, and a "
                       "triton_fp8_gu case stands in for a missing triton_fp8, and at bs 1 alone, where both defaults run the same "
                       "kernels (fp8 inputs start at 2 rows), a triton_fp8_a8lm case (default_view: name used -> case recorded).")
    s["not_usable"] = {n: c.get("error") or c.get("active_why") for n, c in sorted(cases.items())
                       if not _ok(c) and not (n.startswith(TRAINED + ":") and c.get("active"))}
    s["partial"] = {n: c.get("error") for n, c in sorted(cases.items())
                    if n.startswith(TRAINED + ":") and c.get("active") and c.get("error")}
    s["cases_missing"] = [n for n in all_cases() if n not in cases]
    s["merged"] = {"inputs": [src for src, _ in runs], "duplicates": dup,
                   "rule": "a case in several inputs: the latest-finished (t_end) wins; a failed one never replaces a measured one"}
    s["runs"] = [{k: r.get(k) for k in ("started", "command", "sglang_version", "gpu", "copy_bandwidth", "outcomes", "fixture_builds")} | {"file": src}
                 for src, r in runs]
    s["cases"] = cases
    s["date"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    return s


def table(s: dict) -> str:
    lines = [f"{'draft p50 ms':<32}" + "".join(f"{'bs' + b:>9}" for b in ("1", "8", "32"))]
    for name, row in s["draft_ms_p50"].items():
        lines.append(f"{name:<32}" + "".join(f"{row.get(b):>9.4f}" if row.get(b) else f"{'-':>9}" for b in ("1", "8", "32")))
    keys = [k for k in s if k.startswith(("draft_speedup", "accept_ratio", "e2e_ratio")) or k == "roofline_fraction_bs1"]
    lines += [f"{k}: {s[k]}" for k in keys]
    lines += [f"goal {k}: {v['verdict']} {v['values']}" for k, v in s["goals"].items()]
    lines += [f"not usable {k}: {v}" for k, v in s["not_usable"].items()]
    lines += [f"not paired {k}: stock and triton_fp8 ran on two builds (None: not recorded) {v}" for k, v in s.get("unpaired_builds", {}).items()]
    lines += [f"partial {k} (the parts before this error are used): {v}" for k, v in s.get("partial", {}).items()]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="fp8_draft_summary", description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", nargs="+", help="fp8_draft_run_*.json files or folders holding them (merged)")
    ap.add_argument("--out", required=True, help="summary.json to write (table.txt next to it)")
    ap.error = lambda msg: (print(f"fp8_draft_summary: error: {msg} (see --help)", file=sys.stderr), sys.exit(2))
    import figure_cli  # benchmarks/, beside this script
    figure_cli.declare(ap, figure="the FP8 drafter rows' summary (summary.json, table.txt)", folder='2026-12-05-fp8-draft',
                       duration='seconds, CPU only (reads fp8_draft_bench run JSONs)')
    args = ap.parse_args(argv)
    if args.dry_run:
        return figure_cli.dry_run(out=args.out, reads=list(args.inputs))
    try:
        runs = load_runs(args.inputs)
    except ValueError as exc:
        print(f"fp8_draft_summary: error: {exc}", file=sys.stderr)
        return 2
    s = summarize(runs)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(s, indent=1, sort_keys=True) + "\n")
    (out.parent / "table.txt").write_text(table(s))
    print(table(s), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
