"""`sglang-patches advise LOG --adaptive-config OUT.json`: SGLang's `--speculative-adaptive-config`
from one timing log, chosen by cost instead of SGLang's hand-written defaults.

SGLang's adaptive speculation (speculative/adaptive_spec_params.py) keeps, per batch-size bucket (the
integer-string keys), pre-captured `candidate_steps` and moves among them by an EMA (exponential moving
average) of accepted drafts; 0 = no speculation. It knows no cost. A batch is routed as
AdaptiveSpeculativeParams._route does: padded up to the server's next CUDA-graph batch size
(`--cuda-graph-bs-decode`, else SGLang's own list; none with `--disable-cuda-graph`), then to the
largest key <= that size (with `--cuda-graph-bs-decode 1 2 4 8` a batch of 5 is priced in bucket 8).

Per bucket the log's decode cycles routed there give one Observation (the advisor's, of the
configuration with the most steps there; a shorter chain's accept length is exact by truncation or
replayed from the requests' spans), and the advisor's cost model (whatif/advisor.py; with
`--calibration` whatif/cost_model.py) predicts tok/s per steps value:
  * candidate_steps = the best chain and the longer chains predicted within NEAR (3 %) of it; never a
    chain longer than logged, whose acceptance is a guess (steps 7 priced +5 % from a steps-5 log ran
    14 % slower: benchmarks/results/2026-12-02-adaptive-rule-check; the output names it). No chain
    shorter than the best: SGLang's slot steps down whenever its EMA <= the lower candidate - 0.5
    (+ down_hysteresis), so a drafter accepting fewer drafts sits on the shorter chain (measured:
    [4, 5] ran steps 4 on 96 % of its cycles and lost 12 % to steps 5, 2026-12-02-adaptive-one-build);
  * then the start chain where it is a candidate: the server starts at the largest candidate of the
    file, and any other steps value runs on a runtime state SGLang swaps in; at bs 1 on one prompt set
    its cycles ran +7 % / +12 % over the fixed chain's (two servers; elsewhere -0.2 to +2 %,
    benchmarks/results/2026-12-03-adaptive-fixed-build), past the model's 3 % margin, which bounds
    what the start chain gives up; so a bucket whose candidates include the start chain gets it alone;
  * 0 only where a plain decode baseline (--baseline-step-ms, --baseline-log, --calibration's
    baseline, or the log's own steps-0 cycles, nearest batch size), priced as SGLang runs steps 0
    (offline/adaptive_choice.py: a one-token verify and the drafter's extend, 1.2-1.5x a plain step),
    beats every chain up to the logged steps: then [0] alone (from 0 SGLang's slot moves to the next
    candidate at every decision, so a chain beside 0 runs at least every other interval). Without a
    baseline 0 is never written, and the output says so first;
  * a log of an adaptive server mixes steps values that SGLang's slot chose by acceptance, so each saw
    a biased part of the text (steps 7 only where drafts were being accepted): the bucket says which
    share of its cycles it was modelled from, and the output says first to log a fixed-steps server;
  * a bucket the log does not cover keeps SGLang's default entry (said per bucket).
Hysteresis keys are SGLang's default for the bucket. A top-level "sglang_patches" key (SGLang's loader reads only
the integer-string keys) records where each entry came from. OUT is refused when it exists (unless --force), is one
of the inputs (even with --force) or empty; every check runs before anything is written; the write is atomic."""
from __future__ import annotations

import json
import sys

from sglang_patches import compat
from sglang_patches.errors import UserError
from sglang_patches.whatif import advisor as adv
from sglang_patches.offline.adaptive_out import check_out
from sglang_patches.offline.adaptive_routing import bucket_spans, graph_batch_sizes, route
from sglang_patches.offline.adaptive_lines import (bucket_lines, fixed_chain_line, launch_line,
                                                   loses_to_default, per_bucket_line, plain_wins_everywhere)
from sglang_patches.offline.adaptive_choice import NEAR, best_chain, choose, steps0_ms
from sglang_patches.offline.adaptive_sets import at_batch_sizes, best_pair, periods_by_steps
from sglang_patches.offline.adaptive_slot import prefer_start
from sglang_patches.offline.advise_inputs import (MAX_ADVISED_STEPS, baseline_table, check_baseline_args,
                                                  check_calibration_matches, load_calibration, one_step_ms,
                                                  one_step_note, parse_steps, resolve_baseline, verify_ratio_notes)
from sglang_patches.whatif.advisor_observation import config_label, nearest_steps, plain_source
from sglang_patches.whatif.cost_model import nearest_batch
from sglang_patches.whatif.advisor_records import ObservationBuilder
from sglang_patches.vocab.logread import LogReader, check_paths

FORMAT = 2  # of the "sglang_patches" key (2: a bucket's slot replay carries predicted tok_s, with
# default_slot_replay beside it, and set_from_replay marks a pair the replay chose)


REPLAY_MAX_CYCLES = 200_000  # per bucket and configuration: the accepted lists kept for the slot replay


def read_buckets(paths, keys: list[int], rank=None, graph_bs=None, cycles=None):
    """(bucket -> ObservationBuilder of its decode records, whole-log builder, rank, reader). With
    `cycles` (a dict), the chosen rank's drafting cycles go there, per bucket and configuration label:
    {"steps", "topk", "accepted": their accepted lists in log order, "bs": their batch sizes}."""
    reader = LogReader(paths)
    per_rank: dict[int, tuple[dict, ObservationBuilder]] = {}
    per_rank_cycles: dict[int, dict] = {}
    for rec in reader:
        buckets, whole = per_rank.setdefault(rec["rank"], ({}, ObservationBuilder()))
        whole.add(rec)
        if rec["kind"] == "decode":
            key = route(keys, graph_bs, rec["bs"])
            buckets.setdefault(key, ObservationBuilder()).add(rec)
            if cycles is not None and rec["steps"] > 0 and rec["accepted"]:
                kept = per_rank_cycles.setdefault(rec["rank"], {}).setdefault(key, {}).setdefault(
                    config_label(rec["steps"], rec["topk"], rec["draft_tokens"]),
                    {"steps": rec["steps"], "topk": rec["topk"], "accepted": [], "bs": []})
                if len(kept["accepted"]) < REPLAY_MAX_CYCLES:
                    kept["accepted"].append(rec["accepted"]), kept["bs"].append(rec["bs"])
    if not per_rank:
        raise UserError(f"{', '.join(reader.paths)}: no timing records")
    if rank is None:
        rank = min(per_rank)
    elif rank not in per_rank:
        raise UserError(f"--rank {rank}: no records for that rank; ranks present: {', '.join(map(str, sorted(per_rank)))}")
    buckets, whole = per_rank[rank]
    if cycles is not None:
        cycles.update(per_rank_cycles.get(rank, {}))
    return buckets, whole, rank, reader


def _config_for(builder: ObservationBuilder, wanted: str | None, min_cycles: int = 0, steps_list=None) -> str | None:
    """The configuration to model a bucket from: --config when it is there, else the one with the most steps
    (a shorter chain's accept length is exact by truncation) among those with `min_cycles` request-cycles or
    the most of them (all, where --steps asks only above those), ties by request-cycles. The whole log's verdict
    asks adv.FEW_CYCLES: an adaptive server's 10 request-cycles at steps 5 beside 605 at steps 3 would make it
    speak of a chain the server hardly ran (a drafter that accepts nothing is judged on the longest: no minimum)."""
    configs = builder.configs()
    if not configs or wanted is not None:
        return None if not configs or wanted not in configs else wanted
    steps = {n: int(n[1:].split("_")[0]) for n in configs}
    enough = [n for n in configs if configs[n] >= min(min_cycles, max(configs.values()))]
    enough = configs if steps_list and min(steps_list) > max(steps[n] for n in enough) else enough
    return max(enough, key=lambda n: (steps[n], configs[n]))


# ------------------------------------------------------------------ one bucket

def _plain_tok_s(obs, baseline_ms: dict) -> float:
    """Plain decode tok/s over the batch sizes the baseline prices (baseline_price refuses the rest)."""
    cov = [c for c in obs.costs if c.bs in baseline_ms]
    return sum(c.cycles * c.bs for c in cov) * 1000.0 / sum(c.cycles * baseline_ms[c.bs] for c in cov)


def _baseline_for(obs, table: dict | None, step_ms: float | None, log_plain: dict,
                  server_bs=frozenset(), table_src: str = "given baseline") -> tuple[dict | None, str, str]:
    """(plain step ms per priced batch size, where from, a note naming each batch size interpolated or
    refused): whatif/baseline_price.py's rule; (None, "", note) when it refuses every one of the bucket.
    `server_bs`: the batch sizes whose log_plain steps are a plain server's (else steps-0 cycles)."""
    if step_ms is not None:
        return {c.bs: step_ms for c in obs.costs}, "--baseline-step-ms", ""
    src = table if table else log_plain
    if not src:
        return None, "", ""
    out, note = nearest_steps(src, [c.bs for c in obs.costs])
    if not out:  # every batch size of the bucket outside the baseline's: refused here
        return None, "", note
    if table:
        return out, table_src, note
    used = {nearest_batch(src, c.bs) in server_bs for c in obs.costs}  # whose steps priced this bucket
    return out, " and ".join(plain_source(server) for server in (True, False) if server in used), note


def bucket_entry(key: int, builder, args, table, log_plain, cal, steps_list, server_bs=frozenset(),
                 default: dict | None = None, kept_cycles: dict | None = None,
                 periods: dict | None = None) -> tuple[dict | None, dict]:
    """(SGLang entry or None to keep the default, what was done). `server_bs`: see _baseline_for.
    `default`: SGLang's entry for the bucket; `kept_cycles`: read_buckets' cycles of this bucket (cut here to
    the batch sizes priced); the chain periods the set replay used go to periods[key] (adaptive_sets)."""
    name = _config_for(builder, args.config)
    info = {"bucket": key, "batch_sizes": None}
    if name is None:
        info["kept_default"] = ("only plain decode cycles here" if builder.plain else
                                f"no cycles of {args.config} here" if args.config else "no drafting cycles here")
        return None, info
    obs = builder.observation(f"bucket {key}", name)
    configs = builder.configs()
    info["modelled_share"] = round(configs[name] / sum(configs.values()), 4)  # < 1: steps mixed here
    info["batch_sizes"] = {c.bs: c.cycles for c in obs.costs}
    info["modelled_from"] = obs.label
    info["decode_ms"] = round(sum(c.cycles * (c.cycle_ms + c.gap_ms) for c in obs.costs), 3)
    if cal is not None and args.calibration:  # a sweep's fit; --verify-cost's ratios are shapes
        check_calibration_matches(obs, cal, args.calibration_tolerance)
    ratio_notes = verify_ratio_notes(cal, obs) if cal is not None and not args.calibration else []
    table_src = (f"--baseline-step-ms {args.baseline_step_ms}" if args.baseline_step_ms is not None
                 else f"--baseline-log {args.baseline_log}" if args.baseline_log else "the calibration's baseline")
    baseline_ms, base_src, borrowed = _baseline_for(obs, table, one_step_ms(args), log_plain, server_bs, table_src)
    adv.refuse_steps_above_logged(steps_list, obs.steps, f" at bucket {key}")
    steps = steps_list or adv.default_steps(obs)
    advice = adv.advise(obs, steps, baseline_ms, cal)
    plain = _plain_tok_s(obs, baseline_ms) if baseline_ms else None
    from_steps0 = set() if one_step_ms(args) is not None or table or not log_plain else \
        {c.bs for c in obs.costs if nearest_batch(log_plain, c.bs) not in server_bs}  # already steps-0 cycles
    zero = _plain_tok_s(obs, steps0_ms(baseline_ms, from_steps0)) if baseline_ms else None
    if kept_cycles and name in kept_cycles:  # every replay prices the cycles the best line does
        kept_cycles[name] = at_batch_sizes(kept_cycles[name], info["batch_sizes"])
    kept, pair = (kept_cycles or {}).get(name), None
    # the set replay needs one fixed chain's cycles in log order: not an adaptive server's mix
    if kept is not None and kept["topk"] == 1 and default is not None and periods is not None \
            and info["modelled_share"] == 1:
        hyst = {k: v for k, v in default.items() if k != "candidate_steps"}
        periods[key] = periods_by_steps(obs, max([obs.steps, *default["candidate_steps"]]), cal,
                                        steps0_ms(baseline_ms, from_steps0) if baseline_ms else None)
        pair = None if advice.no_accept is not None else \
            best_pair(kept, hyst, periods[key], [0, *(steps_list or range(1, obs.steps + 1))],
                      (best_chain(advice).steps, best_chain(advice).tok_s))
        if pair is not None:  # SGLang's slot moving between two chains beats any one of them here
            pair["break_even_step_ms"] = (sum(c.cycles * c.bs for c in obs.costs) * 1000.0
                                          / sum(c.cycles for c in obs.costs) / pair["tok_s"])
            info["set_from_replay"] = {"tok_s": pair["tok_s"], "best_single": list(pair["single"])}
    candidates, why = choose(advice, plain, zero, pair)
    if advice.no_accept is not None:
        why += ("; the drafter accepts almost nothing here" +
                ("" if baseline_ms else ": without a baseline the least-losing chain is kept, not 0"))
    if borrowed:
        why += f"; {borrowed}"
    if obs.request_cycles < adv.FEW_CYCLES:
        why += f"; only {obs.request_cycles} request-cycles here: a rough guess"
    if obs.simulated:
        why += "; acceptance SIMULATED in this log (not a drafter's)"
    why += "".join(f"; verify priced: {n}" for n in ratio_notes)
    if info["modelled_share"] < 1:
        why += (f"; modelled from {obs.label}'s {100 * info['modelled_share']:.0f} % of this bucket's request-cycles "
                "(the rest ran other steps: biased, see the first line)")
    if advice.contradictions:  # the plain step is slower than the verify: the baseline is not this log's
        info["baseline_contradictions"] = advice.contradictions
        info["warnings"] = list(advice.contradictions)  # one warning line over every bucket's, below
    info.update(candidate_steps=candidates, why=why, baseline=base_src or None,
                predicted_tok_s={str(r.steps): round(r.tok_s, 1) for r in advice.rows},
                plain_tok_s=None if plain is None else round(plain, 1),
                steps0_tok_s=None if zero is None else round(zero, 1),
                plain_server_wins=plain is not None and plain > max(best_chain(advice).tok_s,
                                                                    pair["tok_s"] if pair else 0.0),
                drafter_accepts_nothing=advice.no_accept is not None)
    return {"candidate_steps": candidates}, info


# ------------------------------------------------------------------ the command

def verdict_head(args, whole, reader, steps_list, cal) -> tuple[list[str], list[str], list[str], adv.Advice]:
    """(the whole log's verdict lines, as `advise` and `report` give them for the same log and baseline, the lines
    that detail them, the plain step used per logged batch size as advise prints it, the advice whose chain the
    verdict names); the configuration modelled: --config, else _config_for's with adv.FEW_CYCLES."""
    obs = whole.observation(", ".join(reader.paths), _config_for(whole, args.config, adv.FEW_CYCLES, steps_list))
    baseline_ms, _, used, notes, *_ = resolve_baseline(args, obs)
    advice = adv.advise(obs, steps_list, baseline_ms, cal)
    advice.plain_steps = used  # as advise sets it: the verdict names a given baseline's refusals
    # a baseline or --verify-cost measurement that is not this server's: warned first, as advise does
    detail = [n for n in notes if n.startswith("warning: ")]
    if advice.low_accept:  # the causes and their checks, after the verdict
        detail += adv.low_detail_lines()
    return advice.verdict_lines(), detail, [adv.plain_steps_line(used)] if used else [], advice


def refuse_if_nothing_accepted(whole, config, paths, out, stream=None) -> None:
    """A drafter that accepts nothing over the whole log gets no adaptive config: every candidate
    would pay for drafts that are thrown away (the verdict first, then one line; nothing written).
    Simulated acceptance is no drafter's and passes."""
    from sglang_patches.vocab.no_accept import verdict, verdict_lines

    obs = whole.observation(", ".join(paths), _config_for(whole, config))
    v = None if obs.simulated else verdict(obs.accept_length(obs.steps), obs.steps)
    if v is not None:
        from sglang_patches.whatif.verdict import verdict_lines as leading

        head = leading(obs.accept_length(obs.steps), obs.steps, obs.pos_rates())
        lines = head + verdict_lines(v)[1:]  # the shared verdict, then the causes and the check
        if stream is sys.stderr:  # --json: stdout still gets one JSON document, the verdict in it
            print(json.dumps({"wrote": None, "speculate": False, "drafter_accepts_nothing": True, "server_flags": [],
                              "warnings": [], "verdict_lines": head, "lines": lines, "notes": [], "config": None},
                             indent=2))
        for line in lines:
            print(line, file=stream)
        raise UserError(f"--adaptive-config {out}: not written: with a drafter that accepts nothing, plain decode "
                        "(no --speculative-algorithm) beats every candidate; fix the drafter (above), log again",
                        code=1)


def main(args) -> int:
    from sglang_patches.offline.sweep.results import write_text_atomic

    check_paths(args.files)
    out = check_out(args)
    check_baseline_args(args)  # as plain advise: one verify pricing, a positive step
    if args.max_steps is not None and not 1 <= args.max_steps <= MAX_ADVISED_STEPS:
        raise UserError(f"--max-steps must be from 1 to {MAX_ADVISED_STEPS}")
    steps_list = parse_steps(args.steps) if args.steps else (
        list(range(1, args.max_steps + 1)) if args.max_steps else None)
    defaults = compat.current().ADAPTIVE_DEFAULTS
    keys = sorted(int(k) for k in defaults)
    graph_bs, graph_src = graph_batch_sizes(args)
    cycles: dict = {}
    buckets, whole, rank, reader = read_buckets(args.files, keys, args.rank, graph_bs, cycles)
    if not any(b.configs() for b in buckets.values()):
        whole.observation(", ".join(reader.paths), args.config)  # its one-line error: nothing to model
    if args.config and not any(args.config in b.configs() for b in buckets.values()):
        raise UserError(f"--config {args.config}: not in {', '.join(reader.paths)}; it has "
                        f"{', '.join(sorted(whole.configs()))}")
    refuse_if_nothing_accepted(whole, args.config, reader.paths, out,
                               sys.stderr if getattr(args, "json", False) else None)  # --json: stdout is JSON only
    cal = cal_rows = None
    if args.calibration:
        cal, cal_rows, _ = load_calibration(args.calibration)
    elif getattr(args, "verify_cost", None) is not None:  # MoE verify priced per draft token, as advise's table
        from sglang_patches.whatif.verify_ratios import load_verify_ratios

        cal = load_verify_ratios(args.verify_cost)
    table, base_src, base_notes, _ = baseline_table(args, cal_rows)
    if base_src == "step":
        table = None
    log_plain = {bs: sorted(v)[len(v) // 2] for bs, v in whole.plain.items() if v}
    has_baseline = args.baseline_step_ms is not None or bool(table) or bool(log_plain)

    cfg, infos, periods = {}, [], {}
    for key in keys:
        builder = buckets.get(key)
        entry, info = (None, {"bucket": key, "kept_default": "not in the log"}) if builder is None else \
            bucket_entry(key, builder, args, table, log_plain, cal, steps_list, frozenset(whole.plain_server),
                         defaults[str(key)], cycles.get(key), periods)
        hyst = {k: v for k, v in defaults[str(key)].items() if k != "candidate_steps"}
        cfg[str(key)] = dict(defaults[str(key)]) if entry is None else {**entry, **hyst}
        infos.append(info)
    top = max((s for e in cfg.values() for s in e.get("candidate_steps", ())), default=0)
    prefer_start(cfg, infos, top)
    spans = bucket_spans(keys, graph_bs)  # SGLang routes a batch (padded to a graph size) to the bucket at or below it
    lines = bucket_lines(infos, cfg, defaults, cycles, top, periods, spans)  # per bucket: the answer, then why, indented
    # never below SGLang's own table by this model: a bucket whose entry the slot replay prices below
    # SGLang's default on the same cycles gets the default (the start, and so every replay, may move)
    lost = [i for i in infos if "candidate_steps" in i and loses_to_default(i)]
    for info in lost:
        key, d = info["bucket"], info["default_slot_replay"]
        ratio = info["sglang_slot_replay"]["tok_s"] / d["tok_s"]
        info["why"] = (f"SGLang's default {d['candidate_steps']} written: the chosen {info['candidate_steps']} was "
                       f"predicted {ratio:.2f}x it on these cycles; " + info["why"])
        info["candidate_steps"] = list(defaults[str(key)]["candidate_steps"])
        info["default_written"] = True
        cfg[str(key)] = dict(defaults[str(key)])
    if lost:
        top = max((s for e in cfg.values() for s in e.get("candidate_steps", ())), default=0)
        lines = bucket_lines(infos, cfg, defaults, cycles, top, periods, spans)
    notes = list(base_notes)
    if cal is not None and not args.calibration:
        notes.append(cal.describe())
    logged_bs = sorted({int(bs) for i in infos for bs in (i.get("batch_sizes") or {})})
    if one_step_ms(args) is not None and len(logged_bs) > 1:
        notes.append(one_step_note(args.baseline_step_ms, logged_bs))
    plain_line = plain_wins_everywhere(infos)  # the answer for the logged traffic: before every caveat
    chosen = {tuple(i["candidate_steps"]) for i in infos if "candidate_steps" in i}
    written = next(iter(chosen))[0] if (len(chosen) == 1 and len(next(iter(chosen))) == 1
                                        and next(iter(chosen))[0] > 0 and plain_line is None) else None
    shared, detail, plain_used, whole_advice = verdict_head(args, whole, reader, steps_list, cal)
    # one answer: the fixed server is the chain the verdict names; the file's one chain, where another
    # (adaptive_choice keeps the longest within NEAR of the best), is priced against it over the whole log
    fixed = None if written is None else whole_advice.best.steps
    head = shared
    if fixed is not None:
        tok_s = {r.steps: r.tok_s for r in whole_advice.rows}
        gain = tok_s[written] / tok_s[fixed] - 1 if written in tok_s and tok_s.get(fixed) else None
        head = head + [fixed_chain_line(fixed, written, gain)]  # this file's answer, right after the shared verdict
    elif plain_line is None:  # buckets with different entries: the file's answer per batch size, as above
        head = head + per_bucket_line(infos, spans, top)
    warnings = [d for d in detail if d.startswith("warning: ")]  # a baseline's (printed with detail): in --json too
    shown, warnings = len(warnings), warnings + ([plain_line] if plain_line else [])
    given = has_baseline
    # a baseline measured at other batch sizes only prices no logged bucket (baseline_price.py): none here
    has_baseline = given and any(i.get("baseline") for i in infos if "candidate_steps" in i)
    if not given:  # the verdict says "no plain decode baseline"; this says what it means for the file
        warnings.append("without a baseline the buckets chosen from the log never get 0 (no speculation), "
                        "because nothing says whether plain decode wins (kept SGLang defaults are SGLang's own); "
                        "give --baseline-log of a plain server's SGLang log (no speculation: the truest), a plain "
                        "server's timing log (--patches all,step_timing) as a second LOG, --baseline-step-ms MS|BS:MS,..., "
                        "--calibration SWEEP_DIR, or log under --speculative-adaptive with a steps-0 candidate "
                        "(a slow baseline)")
    found = sorted((c for i in infos for c in i.pop("warnings", ())), key=lambda c: c["bs"])  # not in the file
    warnings += [adv.contradiction_line(found)] if found else []  # one line, as plain advise gives it
    lines[:0] = head + detail + warnings[shown:] + plain_used  # the verdict, as report and advise give it; plain advise leads with the warnings too
    if any(i.get("modelled_share", 1) < 1 for i in infos):
        # right after the verdict, which it qualifies: the verdict too is modelled from that configuration's cycles
        lines.insert(len(head), "the log mixes steps values within a bucket (an adaptive server's: SGLang's slot picks "
                                "the steps by acceptance, so a long chain's cycles are its easy spans): for a config, log "
                                "a fixed-steps server at the largest steps you would allow (e.g. --speculative-num-steps "
                                "5) and advise that")
    if log_plain and not table and one_step_ms(args) is None:
        notes += [n for n in [whole.plain_spec_left_out()] if n] + [adv.STEPS0_BIAS] * whole.plain_adaptive
    logged_top = max((s for i in infos for s in i.get("candidate_steps", ())), default=0)
    if 0 < logged_top < top:  # the start comes from a bucket the log does not cover
        lack = ", ".join(f"bucket {k} (batches of {spans[k]})" for k in keys
                         if "candidate_steps" not in infos[keys.index(k)] and top in cfg[str(k)]["candidate_steps"])
        notes.append(f"the server starts at s{top}, the largest candidate of SGLang's default kept for {lack}, which the "
                     f"log lacks; every bucket chosen from the log (at most s{logged_top}) then runs on swapped-in states: "
                     "log a fixed-steps server at those batch sizes too")
    swapped = [f"{k} ({', '.join(f's{x}' for x in e['candidate_steps'] if x not in (0, top))})" for k, e in cfg.items()
               if any(x not in (0, top) for x in e["candidate_steps"])]
    if swapped and top > 0 and not compat.current().ADAPTIVE_SWAPPED_EXTEND_GRAPHS:
        notes.append(f"on the SGLang installed here a bucket whose steps differ from the start (s{top}), bucket "
                     f"{', '.join(swapped)}, replays draft-extend CUDA graphs captured for the start's steps: such "
                     "cycles ran 0-12 % slower at batch 1 on an H200; the adaptive_graphs feature "
                     "(`python -m sglang_patches.launch` adds it under --speculative-adaptive) brought them to 1.001x "
                     "a fixed server's cycle")
    notes.append(f"batches routed as SGLang does, padded to the CUDA-graph batch sizes: {graph_src}")
    cfg["sglang_patches"] = {"format": FORMAT, "log": ", ".join(reader.paths), "rank": rank,
                             "near": NEAR, "baseline": has_baseline, "cuda_graph_bs": graph_bs,
                             "buckets": infos, "notes": notes}
    write_text_atomic(out, json.dumps(cfg, indent=2) + "\n")
    graph = (" --disable-cuda-graph" if args.disable_cuda_graph else  # the graph sizes the buckets were priced for
             f" {compat.current().FLAG_CUDA_GRAPH_BS} " + " ".join(map(str, graph_bs)) if args.cuda_graph_bs else "")
    # SGLang sizes its CUDA graphs' logits buffer from the starting steps: a candidate above them fails at start
    start = (f" --speculative-num-steps {top} --speculative-eagle-topk 1 --speculative-num-draft-tokens {top + 1}"
             if top > 0 else "")
    # the file's absolute path: the printed launch works from any folder
    server_flags = ["--speculative-adaptive", "--speculative-adaptive-config", str(out.resolve()), *(start + graph).split()]
    if getattr(args, "json", False):
        # speculate: false when plain decode beats every chain in every logged bucket (then server_flags
        # are only for speculating anyway), null without a baseline (nothing says), as plain advise's
        print(json.dumps({"wrote": str(out), "speculate": (plain_line is None) if has_baseline else None,
                          "server_flags": server_flags, "verdict_lines": shared, "fixed_steps": fixed,
                          "warnings": warnings, "lines": lines, "notes": notes, "config": cfg}, indent=2))
        return 0
    for line in lines + [f"note: {note}" for note in notes]:
        print(line)
    print(launch_line(out, server_flags, top, plain_line is not None, chosen <= {(0,)}, fixed))
    return 0
