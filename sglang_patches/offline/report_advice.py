"""`report`'s advice: the advisor's answer for the log's first rank (the object `advise --json` has
under `advice`, priced against advise's baselines), or why there is none; and the PNG's title."""
from __future__ import annotations

import shlex

from sglang_patches.errors import UserError
from sglang_patches.offline.advise_inputs import baseline_too_fast, resolve_baseline
from sglang_patches.whatif.advisor import advise
from sglang_patches.whatif.advisor_records import ObservationBuilder


def advice_object(builder: ObservationBuilder, files, summary: dict, args=None) -> dict:
    """The advice (`Advice.to_dict()`, the object `advise --json` has under `advice`) with its
    `lines`, or why there is none. Baseline: advise's (--baseline-step-ms, --baseline-log,
    --calibration: advise_inputs.resolve_baseline), else the log's own steps-0 decode cycles, if any."""
    from sglang_patches.vocab.no_accept import verdict, verdict_lines
    from sglang_patches.whatif.verdict import verdict_lines as leading

    cmd = "sglang-patches advise " + " ".join(shlex.quote(str(f)) for f in [*files, *_priced_by(args)])
    try:
        obs = builder.observation(", ".join(files))
    except UserError as err:
        d = {"verdict": "unavailable", "reason": str(err), "recommended": None}
        # no prediction (topk > 1, no phase times, ...), but a drafter that accepts nothing is still named
        v = None if summary.get("simulated_records") else verdict(summary.get("accept_length"),
                                                                   len(summary.get("pos_rates") or []))
        if v is not None:
            d.update(verdict="drafter_accepts_nothing", drafter_accepts_nothing=True, no_accept=v, speculate=False)
        configs = builder.configs()
        top = max(configs, key=configs.get) if len(configs) > 1 else None  # the most request-cycles
        d["verdict_lines"] = leading(summary.get("accept_length"), _steps_of(builder),
                                     summary.get("pos_rates") or [], simulated=bool(summary.get("simulated_records")))
        d["lines"] = d["verdict_lines"] + (verdict_lines(v)[1:] if v else []) + [f"none: {err}", f"details: {cmd} --help" if top is None else
                                                        f"details: {cmd} --config {top}, or per batch-size bucket "
                                                        f"{cmd} --adaptive-config adaptive.json"]
        return d
    cal, notes = None, []
    if args is None:
        baseline_ms, src, used = obs.plain_baseline(), obs.plain_label(), obs.plain_used()
        notes = baseline_too_fast(obs, baseline_ms) if baseline_ms else []
    else:
        baseline_ms, src, used, notes, cal, _ = resolve_baseline(args, obs)
    advice = advise(obs, baseline_ms=baseline_ms, calibration=cal)
    advice.baseline_source = src if advice.baseline else ""
    advice.plain_steps = used if advice.baseline or args is not None else []  # a given baseline's refusals too
    d = advice.to_dict(obs.label)
    given = args is not None and (args.baseline_log or args.baseline_step_ms is not None or args.calibration)
    if given and not advice.baseline:  # a baseline the user gave and none of it used: said, never dropped
        why = [f"note: {n}" for n in notes if "refused" in n or "not used" in n]
        at = len(d["verdict_lines"])
        d["lines"][at:at] = why or ["note: the baseline given priced none of the logged batch sizes"]
    warned = [n for n in notes if n.startswith("warning: ")]  # a baseline that is another model's: after the verdict,
    if warned:  # which stays advise's own (at most four lines, the same in every answer)
        at = len(d["verdict_lines"])
        d["lines"][at:at] = warned
    d["lines"][-1] += f"; table and baselines: {cmd}"
    return d


def _priced_by(args) -> list:
    """The baseline and cost flags report was given, so the advise command it names answers the same."""
    out: list = []
    for flag, attr in (("--baseline-log", "baseline_log"), ("--baseline-step-ms", "baseline_step_ms"),
                       ("--calibration", "calibration"), ("--verify-cost", "verify_cost"), ("--rank", "rank")):
        value = getattr(args, attr, None) if args is not None else None
        if value is not None and value is not False:
            out += [flag, format(value, ".15g") if isinstance(value, float) else str(value)]
    tol = getattr(args, "calibration_tolerance", None) if args is not None else None
    if getattr(args, "calibration", None) and tol is not None and tol != 1.5:  # advise's default
        out += ["--calibration-tolerance", format(tol, ".15g")]
    return out


def figure_title(builder: ObservationBuilder, summary: dict, kind: str) -> str:
    """'s5_k1_n6 at batch 1, 2 (decode cycles)': the configuration(s) and batch sizes the figure covers; past
    three sizes, the one with most of the GPU time and its share ('at batch 16: 78 % of the GPU time, the rest
    at 1-15'), so a run of 16 in flight is not titled by its ramp."""
    configs = builder.configs()
    names = ", ".join(sorted(configs, key=configs.get, reverse=True)[:3]) or "no drafting configuration"
    by_bs = {int(b): v for b, v in (summary.get("cycle_time_by_bs") or {}).items()}
    sizes = sorted(by_bs)
    if len(sizes) <= 3:
        return f"{names} at batch {', '.join(map(str, sizes)) or '-'} ({kind} cycles)"
    top = max(by_bs, key=by_bs.get)
    rest = [b for b in sizes if b != top]
    span = f"{rest[0]}-{rest[-1]}" if len(rest) > 1 else str(rest[0])
    return f"{names} at batch {top}: {100 * by_bs[top]:.0f} % of the GPU time, the rest at {span} ({kind} cycles)"


def _steps_of(builder: ObservationBuilder):
    """The steps of the configuration with the most request-cycles (None without one)."""
    configs = builder.configs()
    return int(max(configs, key=configs.get)[1:].split("_")[0]) if configs else None
