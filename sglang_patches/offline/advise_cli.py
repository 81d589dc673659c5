"""`sglang-patches advise LOG [--baseline-step-ms X | --baseline-log LOG2] [--calibration SWEEP_DIR] [--json]`.

Reads one configuration's decode cycles from a `--timing-log` JSONL and predicts other steps /
draft tokens (topk 1): accept length, cycle ms, tok/s, ratio to no speculation, break-even; then
recommends one. The model and its assumptions are in `whatif/advisor.py`.

Baselines (plain decode step ms by batch size): `--baseline-step-ms X` (every batch size),
`--baseline-log LOG2` (the server log of a run without speculation: SGLang's "Decode batch"
lines give #running-req and gen throughput), or the `baseline` rows of the `--calibration` sweep.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from sglang_patches import compat
from sglang_patches.cliargs import OneLineParser, finite_float
from sglang_patches.errors import UserError
from sglang_patches.offline.adaptive_routing import route, spec_cuda_graph_bs
from sglang_patches.offline.advise_help import COLUMNS, SGLANG_SPELLINGS
from sglang_patches.offline.decode_log import median_steps, steady_decode_steps, steady_windows
from sglang_patches.whatif import advisor as adv
from sglang_patches.whatif.advisor_observation import MIN_BLOCKS, Observation, nearest_batch
from sglang_patches.whatif.advisor_records import ObservationBuilder
from sglang_patches.vocab.logread import LogReader, check_paths
from sglang_patches.vocab.schema import SCHEMA_VERSION

JSON_FORMAT = 2  # 2: the advice never recommends a chain past the logged steps; extrapolated_passed_over names the faster guess it passed over
MAX_ADVISED_STEPS = 64  # far beyond any useful chain; bounds the table (a huge value would hang)
PREFILL_NOTE_SHARE = 0.05  # prefill share of the logged GPU time above which advise says ratios are steady-decode only


EXAMPLES = """
examples:
  sglang-patches advise cycles.jsonl --baseline-step-ms 4.67          # which steps, against plain decode
  sglang-patches advise cycles.jsonl plain.jsonl                      # the baseline from a plain server's log
  sglang-patches advise cycles.jsonl plain.jsonl --adaptive-config adaptive.json   # SGLang's adaptive config
"""


def add_baseline_args(p: argparse.ArgumentParser) -> None:
    """The plain decode baseline flags `advise` and `report` share (resolve_baseline reads them)."""
    base = p.add_mutually_exclusive_group()
    base.add_argument("--baseline-step-ms", type=finite_float, metavar="X",
                      help="plain decode step time (ms) without speculation, used for every batch size")
    base.add_argument("--baseline-log", metavar="LOG2",
                      help="server log of the same model run WITHOUT speculation (SGLang's 'Decode batch' lines)")
    p.add_argument("--calibration", metavar="SWEEP_DIR",
                   help="a sweep directory (sglang-patches sweep --out) of the same model: verify / draft-extend cost "
                        "vs draft tokens from its fitted cost model, and its baseline server's steady decode steps "
                        "(logs/baseline.log; else its end-to-end baseline rows, which read high) as the baseline; "
                        "without it verify cost is held constant")
    p.add_argument("--calibration-tolerance", type=finite_float, default=1.5, metavar="F",
                   help="refuse a calibration whose verify or draft cost at the logged configuration differs from the "
                        "log's by more than this factor (another model or GPU; default 1.5)")


def check_baseline_args(args) -> None:
    """The baseline flags' own checks, before anything is read."""
    if args.calibration_tolerance <= 1:
        raise UserError("--calibration-tolerance must be > 1 (a factor, e.g. 1.5)")
    if args.baseline_step_ms is not None and not args.baseline_step_ms > 0:
        raise UserError("--baseline-step-ms must be a positive number of milliseconds")


def build_parser() -> argparse.ArgumentParser:
    w = max(len(c) for c, _ in COLUMNS)
    p = OneLineParser(
        prog="sglang-patches advise", formatter_class=argparse.RawDescriptionHelpFormatter,
        sglang_spellings=SGLANG_SPELLINGS,
        description="Predict what other speculation steps (topk 1) would give, from one timing log, and recommend "
                    "one.\nFewer steps than logged: the accept length replays each followed request's runs of "
                    "accepted and rejected drafts\n(batch 1, or records with per-request tags `req`, timing-log "
                    f"schema {SCHEMA_VERSION}), else truncates each logged cycle; more steps are extrapolated, "
                    "marked, never recommended.\nWithout a plain decode baseline (the flags below, or steps-0 cycles in the log) it "
                    "cannot tell whether to speculate at all,\nand says so first. How it predicts: docs/advisor.md.",
        epilog="columns:\n" + "".join(f"  {c:<{w}}  {h}\n" for c, h in COLUMNS) + EXAMPLES)
    p.add_argument("files", nargs="+", metavar="LOG", help="timing log(s) written by --timing-log (one configuration; --config picks one, an adaptive server's mixed steps go to --adaptive-config); "
                   "a plain server's log under --patches all,step_timing, given as a second LOG, is a plain decode baseline")
    add_baseline_args(p)
    p.add_argument("--config", metavar="NAME", help="analyse only this configuration of a mixed log, e.g. s5_k1_n6")
    p.add_argument("--rank", type=int, metavar="R", help="TP rank to read (default: the lowest in the log)")
    p.add_argument("--max-steps", type=int, metavar="N",
                   help=f"largest steps in the table (default: logged steps + {adv.MAX_EXTRA_STEPS}); with "
                   "--adaptive-config also the largest candidate it may write")
    p.add_argument("--steps", metavar="LIST",
                   help="exactly these steps values, e.g. 1,2,3,5 (the recommendation or candidates are chosen among them)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table (with --adaptive-config: "
                   "what was written, the server flags, the lines and notes printed, and the config)")
    p.add_argument("--adaptive-config", metavar="OUT.json",
                   help="write SGLang's --speculative-adaptive-config from this log instead (candidate steps per "
                        "batch-size bucket by predicted cost; docs/adaptive.md)")
    p.add_argument("--force", action="store_true", help="with --adaptive-config: overwrite an existing OUT.json")
    graphs = p.add_mutually_exclusive_group()
    graphs.add_argument("--cuda-graph-bs-decode", "--cuda-graph-bs", dest="cuda_graph_bs", type=int, nargs="+",
                        metavar="N", help="with --adaptive-config: the server's decode CUDA-graph batch sizes as passed "
                        "to SGLang (it pads a batch to the next one before choosing its bucket; default SGLang's own list)")
    graphs.add_argument("--disable-cuda-graph", action="store_true",
                        help="with --adaptive-config: the server runs without CUDA graphs (batches are not padded)")
    return p


# ------------------------------------------------------------------ inputs

def read_observation(paths, rank=None, config=None):
    reader = LogReader(paths)
    builders: dict[int, ObservationBuilder] = {}
    for rec in reader:
        builders.setdefault(rec["rank"], ObservationBuilder()).add(rec)
    source = ", ".join(reader.paths)
    if rank is None:
        rank = min(builders)
    elif rank not in builders:
        raise UserError(f"--rank {rank}: no records for that rank; ranks present: "
                        f"{', '.join(map(str, sorted(builders)))}")
    return builders[rank].observation(source, config), rank, reader


def parse_steps(text: str) -> list[int]:
    try:
        values = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        values = []
    if not values or values[0] < 1 or values[-1] > MAX_ADVISED_STEPS:
        raise UserError(f"--steps {text!r}: give a comma list of integers from 1 to {MAX_ADVISED_STEPS}, e.g. 1,2,3,5")
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
    return adv.Calibration(fit_all(rows), path), rows, manifest


def check_calibration_matches(obs: Observation, cal: adv.Calibration, tol: float) -> list[dict]:
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


def resolve_baseline(args, obs: Observation):
    """(plain step ms by logged batch size or None, where from, baseline_price's account per batch size,
    notes, calibration, its checks) from --baseline-step-ms / --baseline-log / --calibration, else the
    log's own steps-0 cycles: what `advise` and `report` both price against."""
    from sglang_patches.whatif.baseline_price import one_step, price

    notes, cal, cal_rows, checks = [], None, None, []
    if args.calibration:
        cal, cal_rows, manifest = load_calibration(args.calibration)
        checks = check_calibration_matches(obs, cal, args.calibration_tolerance)
        for c in obs.costs:
            cbs, _ = cal.model_for(c.bs)
            if cbs != c.bs:
                notes.append(f"batch {c.bs}: verify/extend cost slope taken from the calibration's batch {cbs}")
    else:
        notes.append("verify and draft-extend cost held constant across draft tokens (no --calibration): fair for a "
                     "dense target at small batch; pass a sweep directory to fit them")
    table, base_src, base_notes, from_rows = baseline_table(args, cal_rows)
    notes += base_notes
    baseline_ms, used = None, []
    if base_src == "step":
        baseline_ms, used = one_step(args.baseline_step_ms, [c.bs for c in obs.costs])
        base_src = f"--baseline-step-ms {args.baseline_step_ms:g}"
        if len(obs.costs) > 1:
            notes.append(one_step_note(args.baseline_step_ms, [c.bs for c in obs.costs]))
    elif table:
        baseline_ms, used = price(table, [c.bs for c in obs.costs])
        notes += [f"batch {bs}: the baseline log has no steady windows at batch {bs}; its end-to-end "
                  f"row is used ({table[bs]:.2f} ms a step), which reads slow"
                  for bs in baseline_ms if bs in from_rows and "steady" in (base_src or "")]
        if not baseline_ms:
            notes.append(f"baseline {base_src} refused: it was measured at batch "
                         f"{', '.join(map(str, sorted(table)))}, none at or around the logged ones")
            baseline_ms = None
    if baseline_ms is None and obs.plain_baseline():
        baseline_ms = obs.plain_baseline()
        base_src = obs.plain_label()
        notes.append(f"baseline: {base_src}, median GPU ms with the gap after each, by batch size "
                     + ", ".join(f"{bs}: {ms:.2f}" for bs, (_, ms) in obs.plain_steps.items()))
        borrowed, used = obs.plain_borrowed(), obs.plain_used()
        notes += [n for n in (borrowed, obs.plain_note) if n] + [adv.STEPS0_BIAS] * obs.plain_adaptive
    if baseline_ms is None:
        used = []
        notes.append("no baseline: the break-even step ms column is the plain decode step time above which a chain "
                     "wins; give --baseline-step-ms, --baseline-log, --calibration, or a plain server's timing log "
                     "(--patches all,step_timing) as a second LOG for ratios")
    return baseline_ms, base_src, used, notes, cal, checks


# ------------------------------------------------------------------ output

def _f(x, fmt=".2f") -> str:
    return "-" if x is None else format(x, fmt)


def render(result: dict, advice: adv.Advice, out=None) -> None:
    out = out or sys.stdout
    o = result["observation"]
    answer = advice.lines(o["config"])
    for line in answer[:-2]:  # the verdict / missing baseline / contradictions lead
        print(line, file=out)
    print(f"log: {result['log']}: {o['config']}, {o['cycles']} decode cycles, {o['request_cycles']} "
          f"request-cycles, batch sizes {o['batch_sizes']}", file=out)
    print(f"measured: accept length {o['accept_length']:.2f} (accepted drafts + 1 bonus token), per-position "
          f"acceptance P(accepted > k): {' '.join(f'{r:.2f}' for r in o['pos_rates'])}", file=out)
    replay = any(r.basis == "replayed" for r in advice.rows)
    ranged = any(r.accept_length_interval is not None for r in advice.rows)
    hdr = ["config", "steps", "draft tok", "accept len"] + (["acc 95 %"] if ranged else []) + (
        ["trunc acc"] if replay else []) + ["cycle ms", "tok/s", "tok/s/req"] + (
        ["x plain", "break-even acc"] if advice.baseline else ["break-even step ms"]) + ["note"]
    lines = []
    for r in advice.rows:
        be = [_f(r.ratio), adv._be(r.break_even_accept)] if advice.baseline else [_f(r.break_even_step_ms)]
        note = r.basis
        iv = r.accept_length_interval
        lines.append([r.label, str(r.steps), str(r.draft_tokens), _f(r.accept_length)]
                     + ([f"{iv[0]:.2f}-{iv[1]:.2f}" if iv else "-"] if ranged else [])
                     + ([_f(r.accept_length_truncated) if r.basis == "replayed" else "-"] if replay else [])
                     + [_f(r.period_ms), _f(r.tok_s, ".0f"), _f(r.tok_s_per_request, ".0f")] + be + [note])
    widths = [max(len(h), *(len(l[i]) for l in lines)) for i, h in enumerate(hdr)]
    print("  ".join(h.rjust(w) for h, w in zip(hdr, widths)), file=out)
    for l in lines:
        print("  ".join(v.rjust(w) for v, w in zip(l, widths)), file=out)
    if replay:
        print("accept len (replayed): a shorter chain replayed over the logged requests' easy and hard spans; "
              "trunc acc: each logged cycle truncated, which reads low on text with long easy spans "
              "(docs/advisor.md)", file=out)
    print("cycle ms: GPU time from one cycle's start to the next (the phases and the logged median gap between "
          "cycles); tok/s: whole batch over the logged batch-size mix", file=out)
    print("columns: `sglang-patches advise --help`", file=out)
    for note in result["notes"]:
        print(f"note: {note}", file=out)
    for line in answer[-2:]:
        print(line, file=out)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.adaptive_config is not None:  # "" too: adaptive_config.check_out refuses it
        from sglang_patches.offline.adaptive_config import main as write_adaptive_config

        return write_adaptive_config(args)
    typed = "--cuda-graph-bs" if any(a.split("=")[0] == "--cuda-graph-bs" for a in argv or sys.argv[1:]) else \
        "--cuda-graph-bs-decode"
    given = [f for f, v in ((typed, args.cuda_graph_bs), ("--disable-cuda-graph", args.disable_cuda_graph),
                            ("--force", args.force)) if v]
    if given:
        raise UserError(f"{' and '.join(given)} only appl{'y' if len(given) > 1 else 'ies'} with --adaptive-config "
                        "OUT.json (SGLang's adaptive buckets, the file it writes); without it advise writes nothing")
    check_paths(args.files)
    check_baseline_args(args)
    if args.max_steps is not None and not 1 <= args.max_steps <= MAX_ADVISED_STEPS:
        raise UserError(f"--max-steps must be from 1 to {MAX_ADVISED_STEPS}")
    steps_list = parse_steps(args.steps) if args.steps else None
    obs, rank, reader = read_observation(args.files, args.rank, args.config)
    max_steps = obs.steps + adv.MAX_EXTRA_STEPS if args.max_steps is None else args.max_steps
    steps_list = steps_list or list(range(1, max_steps + 1))
    baseline_ms, base_src, used, notes, cal, checks = resolve_baseline(args, obs)
    buckets = sorted(int(k) for k in compat.current().ADAPTIVE_DEFAULTS)  # SGLang's adaptive batch-size keys
    keys = sorted({route(buckets, spec_cuda_graph_bs(), c.bs) for c in obs.costs})  # as SGLang routes a batch
    if len(keys) > 1:  # one answer pooled over batch sizes whose best chains may differ
        notes.append("the log's batch sizes (" + ", ".join(f"{c.bs}: {c.cycles}" for c in obs.costs) + " cycles) "
                     f"fall in SGLang's adaptive buckets {', '.join(map(str, keys))}: this table pools them by cycle "
                     f"count; --adaptive-config OUT.json answers per bucket")
    share = obs.prefill_share
    if share is not None and share >= PREFILL_NOTE_SHARE:
        notes.append(f"prefill took {100 * share:.0f} % of this log's GPU time ({obs.prefill_records} prefill records, "
                     f"{obs.prefill_ms / obs.prefill_records:.1f} ms each on average); the rows are steady decode, so at "
                     "this traffic every gain over plain decode is smaller end to end (a speculative prefill also "
                     "runs the drafter)")
    if obs.simulated:
        notes.append("the log's acceptance is simulated (--simulate-acceptance or SGLANG_SIMULATE_ACC_LEN): the predictions show what the "
                     "simulated rates would give, not a real drafter")
    if not all(c.gap_known for c in obs.costs):
        notes.append("the log has no gpu_gap_ms: host overhead between cycles is not in the cycle ms")
    if obs.steps == 1 and max(steps_list) > 1:
        notes.append("steps-1 log: one drafter forward estimated as the draft-extend's time")
    advice = adv.advise(obs, steps_list, baseline_ms, cal)
    advice.baseline_source = base_src if baseline_ms is not None else ""
    advice.plain_steps = used
    if advice.no_accept is None and advice.baseline:
        be = min((r.break_even_accept for r in advice.rows if r.break_even_accept is not None), default=None)
        if be is not None and be < 1 and not advice.contradictions:
            notes.append("a break-even accept length below 1: a chain cycle is predicted faster than the baseline's "
                         "plain decode step, which cannot be for one target; check the baseline")
    intervals = obs.accept_length_intervals([r.steps for r in advice.rows]) or {}
    for r in advice.rows:
        r.accept_length_interval = intervals.get(r.steps)
    wide = [(r.label, max(r.accept_length - r.accept_length_interval[0],
                          r.accept_length_interval[1] - r.accept_length) / r.accept_length)
            for r in advice.rows if r.accept_length_interval and not r.logged]
    widest = max(wide, key=lambda t: t[1], default=None)
    if widest is not None and widest[1] > 0.05:
        notes.append(f"the log is short for these predictions: another sample of the same traffic could move the "
                     f"accept lengths by up to {100 * widest[1]:.0f} % ({widest[0]}; the 'acc 95 %' column, a "
                     f"bootstrap over the log's {len(obs.blocks)} requests); log more requests for a tighter answer")
    elif not intervals and obs.spans:
        notes.append(f"no 'acc 95 %' range: it needs a log that follows at least {MIN_BLOCKS} requests, this one "
                     f"follows {len(obs.blocks or [])}; log more requests for one (the span replay needs only one)")
    elif not intervals:
        notes.append("no 'acc 95 %' range and no span replay: they need a log that follows its requests: batch 1, "
                     f"or records with per-request tags (`req`, timing-log schema {SCHEMA_VERSION}); this log's "
                     "records mix requests at batch > 1 without saying which cycle is whose")
    off = [(r.label, r.accept_length / r.accept_length_truncated - 1) for r in advice.rows if r.basis == "replayed"]
    worst = max(off, key=lambda t: abs(t[1]), default=None)
    if worst is not None and abs(worst[1]) > 0.02:
        notes.append(f"the span replay is {100 * abs(worst[1]):.1f} % {'above' if worst[1] > 0 else 'below'} the "
                     f"plain truncation at {worst[0]}: the text alternates long easy and hard spans, which a shorter "
                     "chain crosses differently than the logged one (on the H200 the replay was the closer one: the "
                     "advisor check); on such text two chains SGLang switches between under --speculative-adaptive can "
                     "beat any one: `advise LOG --adaptive-config OUT.json` prices that")
    if obs.spans and obs.depth_decay() and any(r.steps < obs.steps for r in advice.rows):
        notes.append("acceptance falls with the draft's depth in this log (pooled conditional rate after the first position "
                     "more than 3 % below the first's): the truncation, which keeps each depth's rate, is the estimate")
    result = {
        "format": JSON_FORMAT, "log": ", ".join(reader.paths), "rank": rank,
        "observation": {"config": obs.label, "steps": obs.steps, "topk": obs.topk,
                        "draft_tokens": obs.draft_tokens, "cycles": obs.cycles,
                        "request_cycles": obs.request_cycles,
                        "accept_length": obs.accept_length(obs.steps), "accepted_hist": obs.hist,
                        "simulated": obs.simulated,
                        "replay": any(r.basis == "replayed" for r in advice.rows),
                        "pos_rates": obs.pos_rates(),
                        "prefill_records": obs.prefill_records, "prefill_gpu_share": obs.prefill_share,
                        "batch_sizes": ", ".join(f"{c.bs} ({c.cycles})" for c in obs.costs),
                        "costs": [vars(c) for c in obs.costs]},
        "baseline": None if baseline_ms is None else {"source": base_src,
                                                      "step_ms": {str(k): v for k, v in baseline_ms.items()}},
        "calibration": None if cal is None else {"source": args.calibration, "checks": checks,
                                                 "batch_sizes": sorted(cal.models)},
        "advice": advice.to_dict(obs.label), "recommendation": advice.lines(obs.label), "notes": notes,
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        render(result, advice)
    return 0
