"""The inputs `advise`, `advise --adaptive-config` and `report` share: the steps list, the plain decode
baseline (--baseline-step-ms, --baseline-log, a calibration sweep's baseline, else the log's own
steps-0 cycles) and the calibration sweep, with their flags and checks. advise_cli.py (the table)
and adaptive_config.py (SGLang's adaptive buckets) both read them from here."""
from __future__ import annotations

import argparse
import math
from pathlib import Path

from sglang_patches.cliargs import finite_float
from sglang_patches.errors import UserError
from sglang_patches.offline.decode_log import median_steps, steady_decode_steps, steady_windows
from sglang_patches.whatif import advisor as adv
from sglang_patches.whatif.advisor_observation import Observation
from sglang_patches.whatif.calibration import Calibration
from sglang_patches.vocab.logread import check_paths

MAX_ADVISED_STEPS = 64  # far beyond any useful chain; bounds the table (a huge value would hang)


class StepTable(dict):
    """--baseline-step-ms BS:MS,...: plain decode step ms measured at some batch sizes, priced for the
    logged ones by whatif/baseline_price.py's rule; str() gives the flag's text back."""

    def __str__(self) -> str:
        return ",".join(f"{bs}:{format(ms, '.15g')}" for bs, ms in sorted(self.items()))


def baseline_step_arg(text: str):
    """argparse `type=` for --baseline-step-ms: one step for every batch size (X), or BS:MS pairs."""
    if ":" not in text:
        return finite_float(text)
    table = StepTable()
    for pair in text.split(","):
        bs, _, ms = pair.partition(":")
        try:
            b, m = int(bs), finite_float(ms)
        except (ValueError, argparse.ArgumentTypeError):
            b, m = 0, 0.0
        if b < 1 or not m > 0 or b in table:
            twice = f"batch {b} given twice; " if b in table else ""
            raise argparse.ArgumentTypeError(f"{text!r}: {twice}give one step in ms (e.g. 4.2) or distinct batch:ms "
                                             "pairs with batch >= 1 and ms > 0 (e.g. 1:4.09,4:5.75,16:6.26)")
        table[b] = m
    return table


def one_step_ms(args) -> float | None:
    """The single --baseline-step-ms given for every batch size, None for none or a per-batch table."""
    v = getattr(args, "baseline_step_ms", None)
    return None if v is None or isinstance(v, StepTable) else v


def add_baseline_args(p: argparse.ArgumentParser) -> None:
    """The plain decode baseline flags `advise` and `report` share (resolve_baseline reads them)."""
    base = p.add_mutually_exclusive_group()
    base.add_argument("--baseline-step-ms", type=baseline_step_arg, metavar="X|BS:MS,...",
                      help="plain decode step time (ms) without speculation: one value used for every batch size, "
                           "or the steps measured at some batch sizes, e.g. 1:4.09,4:5.75,16:6.26 (a logged batch "
                           "size between two is interpolated, one outside them refused)")
    base.add_argument("--baseline-log", metavar="LOG2",
                      help="server log of the same model run WITHOUT speculation (SGLang's 'Decode batch' lines)")
    p.add_argument("--calibration", metavar="SWEEP_DIR",
                   help="a sweep directory (sglang-patches sweep --out) of the same model: verify / draft-extend cost "
                        "vs draft tokens from its fitted cost model, and its baseline server's steady decode steps "
                        "(logs/baseline.log; else its end-to-end baseline rows, which read high) as the baseline; "
                        "without it verify cost is held constant")
    p.add_argument("--verify-cost", metavar="SUMMARY[:FIXTURE]",
                   help="benchmarks/verify_cost.py's summary.json (of this model or a fixture of its shape): price "
                        "each chain's verify by the measured verify / plain step ratio over draft tokens instead of "
                        "holding it constant; for MoE targets, whose verify reads the experts of every draft token. "
                        "FIXTURE: one of the file's measured fixtures (verify_over_step_by_fixture), needed when it "
                        "holds several. Several runs of one fixture join with commas (A.json,B.json[:FIXTURE]), "
                        "over the first run's plain step. A note says when the log's own verify / plain step is far "
                        "from the measurement's. Not with --calibration (its sweep fits verify itself); with --adaptive-config it prices "
                        "each bucket")
    p.add_argument("--calibration-tolerance", type=finite_float, default=1.5, metavar="F",
                   help="refuse a calibration whose verify or draft cost at the logged configuration differs from the "
                        "log's by more than this factor (another model or GPU; default 1.5)")


def check_baseline_args(args) -> None:
    """The baseline flags' own checks, before anything is read."""
    if args.calibration_tolerance <= 1:
        raise UserError("--calibration-tolerance must be > 1 (a factor, e.g. 1.5)")
    if getattr(args, "verify_cost", None) is not None and args.calibration:
        raise UserError("--verify-cost and --calibration both price verify over draft tokens; give one "
                        "(--calibration's sweep fits verify itself)")
    if one_step_ms(args) is not None and not args.baseline_step_ms > 0:
        raise UserError("--baseline-step-ms must be a positive number of milliseconds")


def parse_steps(text: str) -> list[int]:
    try:
        values = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        values = []
    bad = [v for v in values if not 1 <= v <= MAX_ADVISED_STEPS]
    if not values or bad:
        what = f"{', '.join(map(str, bad))} {'is' if len(bad) == 1 else 'are'} outside 1-{MAX_ADVISED_STEPS}; " if bad else ""
        raise UserError(f"--steps {text!r}: {what}give a comma list of integers from 1 to {MAX_ADVISED_STEPS}, e.g. 1,2,3,5")
    return values


def parse_baseline_log(path: str) -> dict[int, float]:
    """Plain decode step ms by #running-req from the steady 'Decode batch' windows of a server log
    (sglang_patches/offline/decode_log.py); a one-line error naming --baseline-log otherwise."""
    check_paths([path], "the log (stdout/stderr) of an SGLang server run without speculation, with its "
                        "'Decode batch' lines", flag="--baseline-log")
    return steady_decode_steps(path, "--baseline-log")


def load_calibration(path: str):
    from sglang_patches.offline.sweep import results as res
    from sglang_patches.whatif.cost_model import fit_all

    d = Path(path)
    if not d.is_dir():
        raise UserError(f"--calibration {path}: not a directory; give a sweep directory (sglang-patches sweep --out)")
    if not (d / res.RESULTS).exists():
        raise UserError(f"--calibration {path}: no {res.RESULTS}; give the --out directory of a finished sweep")
    rows = list(res.latest_rows(res.read_rows(d)).values())
    manifest = res.read_json(d / res.MANIFEST) if (d / res.MANIFEST).exists() else {}
    return Calibration(fit_all(rows), path), rows, manifest


def check_calibration_matches(obs: Observation, cal: Calibration, tol: float) -> list[dict]:
    """Refuse (UserError) a calibration whose costs at the logged configuration are another model's."""
    from sglang_patches.whatif.cost_model import draft_features, ndt_features
    from sglang_patches.whatif.grid import Config

    cfg = Config(topk=obs.topk, steps=obs.steps, draft_tokens=obs.draft_tokens)
    checks = []
    for c in obs.costs:
        cbs, m = cal.model_for(c.bs)
        pairs = [("verify", m.verify(ndt_features(cfg)), c.verify_ms)]
        if c.draft_ms > 0.05:
            pairs.append(("draft", m.draft(draft_features(cfg)), c.draft_ms))
        for phase, predicted, logged in pairs:
            ratio = logged / predicted if predicted > 0 else math.inf
            checks.append({"bs": c.bs, "calibration_bs": cbs, "phase": phase, "log_ms": logged,
                           "calibration_ms": predicted, "ratio": ratio})
            if not (1 / tol <= ratio <= tol):
                raise UserError(
                    f"--calibration {cal.source}: {phase} at {obs.label} batch {c.bs} is {logged:.2f} ms in the log "
                    f"but {predicted:.2f} ms in the calibration (batch {cbs}): it is not this log's model or GPU; "
                    f"calibrate with a sweep of the same target and drafter (or raise --calibration-tolerance)")
    return checks


def one_step_note(step_ms: float, batch_sizes) -> str:
    """What a single --baseline-step-ms stands for when the log has several batch sizes."""
    sizes = ", ".join(map(str, batch_sizes))
    return (f"--baseline-step-ms {step_ms:g} is the plain decode step at every logged batch size ({sizes}), though a "
            "plain step grows with the batch; --baseline-log SERVER.log gives one per batch size")


def baseline_table(args, cal_rows) -> tuple[dict | None, str | None, list[str], set]:
    """(plain decode step ms by batch size, where it came from, notes, the batch sizes whose step is an
    end-to-end calibration row)."""
    if isinstance(args.baseline_step_ms, StepTable):
        return dict(args.baseline_step_ms), f"--baseline-step-ms {args.baseline_step_ms}", [], set()
    if args.baseline_step_ms is not None:
        return None, "step", [], set()
    if args.baseline_log:
        return parse_baseline_log(args.baseline_log), f"log {args.baseline_log}", [], set()
    if not cal_rows:
        return None, None, [], set()
    ok = [r for r in cal_rows if r.get("config") == "baseline" and r.get("status") == "ok" and r.get("tok_s")]
    rows = {int(r["batch_size"]): int(r["batch_size"]) * 1000.0 / r["tok_s"] for r in ok}
    # The rows' tok/s is end to end (prefill, the batch's ramp and tail), while the advisor's rows are steady
    # decode cycles: on the H200 trained-8b grid that put plain decode 16 % (bs 1) to 55 % (bs 8) slower than
    # the steady step and the ratios that much too high. The baseline server's own log has the steady steps
    # (every log a baseline row names; a resumed sweep may have written several servers' windows).
    windows, logs, notes = {}, [], []
    for name in dict.fromkeys(Path(str(r.get("log_path") or "baseline.log")).name for r in ok):
        log = Path(args.calibration) / "logs" / name
        if not log.is_file():
            continue
        try:
            for n, v in steady_windows(str(log), "baseline server log").items():
                windows.setdefault(n, []).extend(v)
            logs.append(str(log))
        except UserError as err:
            notes.append(f"the calibration's {err} (not used)")
    table = median_steps(windows)
    if not table:
        if rows:
            notes.append("no steady windows in the calibration's baseline server log(s)" if logs else
                         "the calibration has no baseline server log (logs/baseline.log)")
            notes.append("so the baseline is its end-to-end tok/s, which includes prefill and each batch's tail that "
                         "the rows' steady decode cycles do not: 'x no-spec' reads high; give --baseline-log or "
                         "--baseline-step-ms for a steady decode baseline")
            return rows, f"calibration baseline rows (end-to-end tok/s) of {args.calibration}", notes, set(rows)
        return None, None, notes, set()
    from_rows = {bs for bs in rows if bs not in table}   # sizes the log(s) never decoded steadily at
    table.update({bs: rows[bs] for bs in from_rows})
    return table, f"steady decode steps in the calibration's baseline server log {', '.join(logs)}", notes, from_rows


def verify_ratio_notes(cal, obs: Observation) -> list[str]:
    """Where --verify-cost's ratios price this log's batch sizes from another measured batch, or its logged draft
    tokens from outside the measured ones (held or extended: a guess)."""
    from sglang_patches.whatif.baseline_price import ranges

    notes, borrowed = [], {}
    for c in obs.costs:
        if cal.batch_for(c.bs) != c.bs:
            borrowed.setdefault(cal.batch_for(c.bs), []).append(c.bs)
        measured = sorted(cal.table[cal.batch_for(c.bs)])
        if not measured[0] <= obs.steps + 1 <= measured[-1]:
            notes.append(f"batch {c.bs}: the logged {obs.steps + 1} draft tokens lie outside the measured "
                         f"{measured[0]}-{measured[-1]}: its ratios there are held or extended, a guess")
    return notes + [f"batch {ranges(sizes)}: verify ratios of the measured batch {b}" for b, sizes in borrowed.items()]


def baseline_too_fast(obs: Observation, baseline_ms: dict) -> list[str]:
    """One warning where the plain step given is too fast to be this server's: the log's verify runs the same
    target over T draft tokens per request, which costs at most about T plain steps (all T tokens' compute, the
    weights read once), so a verify over T + 1 plain steps means a smaller model, a faster GPU or more TP ranks
    (the other side, a plain step slower than the verify, is advisor.baseline_contradictions')."""
    tokens = max(obs.draft_tokens, 1)
    over = [(c.verify_ms / baseline_ms[c.bs], c) for c in obs.costs
            if baseline_ms.get(c.bs) and c.verify_ms and c.verify_ms > (tokens + 1) * baseline_ms[c.bs]]
    if not over:
        return []
    ratio, c = max(over, key=lambda o: o[0])
    return [f"warning: batch {c.bs}: the log's verify of {tokens} tokens ({c.verify_ms:.2f} ms) is {ratio:.1f}x the "
            f"plain step used ({baseline_ms[c.bs]:.2f} ms): another model?"]


def resolve_baseline(args, obs: Observation):
    """(plain step ms by logged batch size or None, where from, baseline_price's account per batch size
    (without a baseline: the refusals of the one given, if any), notes, calibration, its checks) from
    --baseline-step-ms / --baseline-log / --calibration, else the log's own steps-0 cycles: what
    `advise` and `report` both price against."""
    from sglang_patches.whatif.baseline_price import one_step, price

    notes, cal, cal_rows, checks = [], None, None, []
    if args.calibration:
        cal, cal_rows, manifest = load_calibration(args.calibration)
        checks = check_calibration_matches(obs, cal, args.calibration_tolerance)
        for c in obs.costs:
            cbs, _ = cal.model_for(c.bs)
            if cbs != c.bs:
                notes.append(f"batch {c.bs}: verify/extend cost slope taken from the calibration's batch {cbs}")
    elif getattr(args, "verify_cost", None) is not None:
        from sglang_patches.whatif.verify_ratios import load_verify_ratios

        cal = load_verify_ratios(args.verify_cost)
        notes += [cal.describe(), *verify_ratio_notes(cal, obs)]
    else:
        notes.append("verify and draft-extend cost held constant across draft tokens (no --calibration): fair for a "
                     "dense target at small batch; pass a sweep directory to fit them, or for an MoE target "
                     "--verify-cost DIR/summary.json of your model (python benchmarks/verify_cost.py --out DIR "
                     "--model TARGET_DIR --draft DRAFT_DIR, one GPU machine)")
    table, base_src, base_notes, from_rows = baseline_table(args, cal_rows)
    notes += base_notes
    baseline_ms, used, one_for_all = None, [], False
    refused = []  # the account of a baseline given that priced none of the logged batch sizes: kept for the answer
    if base_src == "step":
        baseline_ms, used = one_step(args.baseline_step_ms, [c.bs for c in obs.costs])
        base_src = f"--baseline-step-ms {args.baseline_step_ms:g}"
        one_for_all = len(obs.costs) > 1  # too fast at the larger batch sizes by construction, no other model
        if one_for_all:
            notes.append(one_step_note(args.baseline_step_ms, [c.bs for c in obs.costs]))
    elif table:
        if isinstance(args.baseline_step_ms, StepTable):
            pairs = sorted(table.items())
            notes += [f"--baseline-step-ms: the step at batch {b} ({m:.2f} ms) is under batch {a}'s ({n:.2f} ms), but a "
                      "plain decode step grows with the batch (it adds attention and KV reads); check the pairs"
                      for (a, n), (b, m) in zip(pairs, pairs[1:]) if m < n]
        baseline_ms, used = price(table, [c.bs for c in obs.costs])
        notes += [f"batch {bs}: the baseline log has no steady windows at batch {bs}; its end-to-end "
                  f"row is used ({table[bs]:.2f} ms a step), which reads slow"
                  for bs in baseline_ms if bs in from_rows and "steady" in (base_src or "")]
        if not baseline_ms:
            notes.append(f"baseline {base_src} refused: it was measured at batch "
                         f"{', '.join(map(str, sorted(table)))}, none at or around the logged ones")
            baseline_ms, refused = None, used
    if baseline_ms is None and obs.plain_baseline():
        baseline_ms = obs.plain_baseline()
        base_src = obs.plain_label()
        notes.append(f"baseline: {base_src}, median GPU ms with the gap after each, by batch size "
                     + ", ".join(f"{bs}: {ms:.2f}" for bs, (_, ms) in obs.plain_steps.items()))
        borrowed, used = obs.plain_borrowed(), obs.plain_used()
        notes += [n for n in (borrowed, obs.plain_note) if n] + [adv.STEPS0_BIAS] * obs.plain_adaptive
    # a plain server's log given beside this one may be another model's
    fast = baseline_too_fast(obs, baseline_ms) if baseline_ms is not None and not one_for_all else []
    notes += fast
    if baseline_ms is not None and getattr(cal, "kind", "") == "verify ratios":  # its warning: the same cause
        notes += [n for n in cal.log_mismatch(obs, baseline_ms) if not (fast and n.startswith("warning: "))]
    if baseline_ms is None and getattr(cal, "plain_steps", None):
        notes.append("the --verify-cost measurement has plain decode steps too; if it is this model on this GPU, "
                     f"give them: --baseline-step-ms {StepTable(cal.plain_steps)}")
    if baseline_ms is None:
        used = refused  # the refusals say why the baseline given is not used (verdict and "plain decode step used")
        notes.append("no baseline: the break-even step ms column is the plain decode step time above which a chain "
                     "wins (the baselines to give: the lines above the table)")
    return baseline_ms, base_src, used, notes, cal, checks
