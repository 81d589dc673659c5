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
import sys

from sglang_patches import compat
from sglang_patches.cliargs import OneLineParser
from sglang_patches.errors import UserError
from sglang_patches.offline.adaptive_routing import route, spec_cuda_graph_bs
from sglang_patches.offline.adaptive_config import main as write_adaptive_config
from sglang_patches.offline.advise_help import COLUMNS, SGLANG_SPELLINGS
from sglang_patches.offline.advise_inputs import (MAX_ADVISED_STEPS, add_baseline_args, check_baseline_args,
                                                  parse_steps, resolve_baseline)
from sglang_patches.whatif import advisor as adv
from sglang_patches.whatif.advisor_observation import MIN_BLOCKS, MIN_BS_CYCLES, PREFILL_SLOW_FACTOR
from sglang_patches.whatif.advisor_records import ObservationBuilder
from sglang_patches.vocab.logread import LogReader, check_paths
from sglang_patches.vocab.schema import SCHEMA_VERSION

# --json layout: 2: the advice never recommends a chain past the logged steps (extrapolated_passed_over names
# the faster guess it passed over); 3: batch sizes of under 5 decode cycles are left out of observation.costs
# (observation.left_out_batch_sizes); 4: observation.prefill_gpu_share leaves out first-use prefills (over 10x the
# median prefill, counted in observation.slow_prefill_records)
JSON_FORMAT = 4
PREFILL_NOTE_SHARE = 0.05  # prefill share of the logged GPU time above which advise says ratios are steady-decode only


EXAMPLES = """
examples:
  sglang-patches advise cycles.jsonl --baseline-step-ms 4.67          # which steps, against plain decode
  sglang-patches advise cycles.jsonl plain.jsonl                      # the baseline from a plain server's log
  sglang-patches advise cycles.jsonl plain.jsonl --adaptive-config adaptive.json   # SGLang's adaptive config
"""


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


# ------------------------------------------------------------------ output

def _f(x, fmt=".2f") -> str:
    return "-" if x is None else format(x, fmt)


def render(result: dict, advice: adv.Advice, out=None) -> None:
    out = out or sys.stdout
    o = result["observation"]
    answer = advice.lines(o["config"])
    levers = [ln for ln in answer[:-2] if ln.startswith("levers: ")]
    for line in answer[:-2]:  # the verdict / missing baseline / contradictions lead
        if line not in levers:
            print(line, file=out)
    for note in result["notes"]:  # a warning among the notes (a baseline that is another model's) comes next
        if note.startswith("warning: "):
            print(note, file=out)
    for line in levers:  # what would change the figure: after every warning on the figure itself
        print(line, file=out)
    thin = sum(o.get("left_out_batch_sizes", {}).values())
    finished = o.get("finished_cycles", 0)
    left = ([f"{thin} of the batch filling or draining (sizes held < {MIN_BS_CYCLES} cycles)"] * bool(thin)
            + [f"{finished} whose every request had already finished, no token kept"] * bool(finished))
    print(f"log: {result['log']}: {o['config']}, {o['cycles']} decode cycles, {o['request_cycles']} "
          f"request-cycles (one request in one cycle), batch sizes {o['batch_sizes']}"
          + (f" (left out: {', '.join(left)})" if left else ""), file=out)
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
        if not note.startswith("warning: "):
            print(f"note: {note}", file=out)
    for line in answer[-2:]:
        print(line, file=out)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.adaptive_config is not None:  # "" too: adaptive_config.check_out refuses it
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
    if obs.thin_note():
        notes.append(obs.thin_note())
    buckets = sorted(int(k) for k in compat.current().ADAPTIVE_DEFAULTS)  # SGLang's adaptive batch-size keys
    keys = sorted({route(buckets, spec_cuda_graph_bs(), c.bs) for c in obs.costs})  # as SGLang routes a batch
    if len(keys) > 1:  # one answer pooled over batch sizes whose best chains may differ
        notes.append("the log's batch sizes (" + ", ".join(f"{c.bs}: {c.cycles}" for c in obs.costs) + " cycles) "
                     f"fall in SGLang's adaptive buckets {', '.join(map(str, keys))}: this table pools them by cycle "
                     f"count; --adaptive-config OUT.json answers per bucket")
    share = obs.prefill_share
    if share is not None and share >= PREFILL_NOTE_SHARE:
        n_slow, slow_ms = obs.prefill_slow
        n = obs.prefill_records - n_slow
        notes.append(f"prefill took {100 * share:.0f} % of this log's GPU time ({n} prefill records, "
                     f"{(obs.prefill_ms - slow_ms) / n:.1f} ms each on average); the rows are steady decode, so at "
                     "this traffic every gain over plain decode is smaller end to end (a speculative prefill also "
                     "runs the drafter)")
    if obs.prefill_slow[0]:
        every = obs.prefill_ms / (obs.prefill_ms + obs.decode_ms) if obs.prefill_ms + obs.decode_ms > 0 else 0.0
        notes.append(f"{obs.prefill_slow[0]} prefill(s) took {obs.prefill_slow[1] / 1000:.1f} s in all, each over "
                     f"{PREFILL_SLOW_FACTOR:g}x the median prefill: kernels compiled at first use (which a long-running "
                     f"server pays once) or far longer prompts; left out of prefill's share (with them "
                     f"{100 * every:.0f} %)")
    if obs.simulated:
        notes.append("the log's acceptance is simulated (--simulate-acceptance or SGLANG_SIMULATE_ACC_LEN): the predictions show what the "
                     "simulated rates would give, not a real drafter" + (
                         "; shorter chains are truncated, never replayed from the requests' spans: simulated "
                         "acceptance is drawn per cycle, not read from the text" if obs.steps > 1 else ""))
    if not all(c.gap_known for c in obs.costs):
        notes.append("the log has no gpu_gap_ms: host overhead between cycles is not in the cycle ms")
    if obs.steps == 1 and max(steps_list) > 1:
        notes.append("steps-1 log: one drafter forward estimated as the draft-extend's time")
    if obs.steps >= 2 and 1 in steps_list and getattr(cal, "kind", "") != "calibration":  # advisor.draft_ms
        notes.append("s1's draft phase runs no drafter forward: priced at 0 ms, its fixed part (the top-k and the "
                     "verify tree's build, a steps-1 log would show it) left out, so s1 reads a little fast")
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
                        "slow_prefill_records": obs.prefill_slow[0],
                        "batch_sizes": ", ".join(f"{c.bs} ({c.cycles})" for c in obs.costs),
                        "left_out_batch_sizes": {str(bs): n for bs, n in obs.thin_bs},
                        "finished_cycles": obs.finished_cycles,
                        "costs": [vars(c) for c in obs.costs]},
        "baseline": None if baseline_ms is None else {"source": base_src,
                                                      "step_ms": {str(k): v for k, v in baseline_ms.items()}},
        "calibration": None if cal is None else (
            {"source": args.calibration, "checks": checks, "batch_sizes": sorted(cal.models)} if cal.kind == "calibration"
            else {"source": cal.source, "kind": cal.kind, "batch_sizes": sorted(cal.table),
                  "verify_over_step": {str(b): {str(t): r for t, r in row.items()} for b, row in cal.table.items()}}),
        "advice": advice.to_dict(obs.label), "recommendation": advice.lines(obs.label), "notes": notes,
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        render(result, advice)
    return 0
