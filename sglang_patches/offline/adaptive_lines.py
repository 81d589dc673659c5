"""What `advise --adaptive-config` prints: each bucket's answer on one line with its reasons indented
below, the warnings that lead them, and the closing line with the server flags
(offline/adaptive_config.py builds the buckets and writes the file).
"""
from __future__ import annotations

from sglang_patches.offline.adaptive_choice import NEAR
from sglang_patches.offline.adaptive_sets import replay_cycles
from sglang_patches.offline.adaptive_slot import SlotRule, replay

# The steps flags the printed launch carries; the server's own values of them must go, not stay
# beside them (argparse keeps the last of a repeated flag, so a pasted list would depend on order).
STEPS_FLAGS = "--speculative-num-steps, --speculative-eagle-topk and --speculative-num-draft-tokens"


def split_reasons(why: str) -> list[str]:
    """A bucket's `why` in its parts: split at "; " only outside parentheses, so that a part that
    carries its own "(...; ...)" aside stays on one line."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(why):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(depth - 1, 0)
        elif depth == 0 and why.startswith("; ", i):
            parts.append(why[start:i])
            start = i + 2
    return parts + [why[start:]]


def bucket_lines(infos: list[dict], cfg: dict, defaults: dict, cycles: dict, top: int,
                 periods: dict | None = None, spans: dict | None = None) -> list[str]:
    """Per bucket: the answer (with SGLang's slot replayed on the bucket's own cycles), then its
    reasons, the file's entry against SGLang's default priced by the same replay (where `periods` has
    the bucket: adaptive_sets), and the cycles it came from, indented. Sets each info's decode_share,
    sglang_slot_replay and default_slot_replay. `spans`: bucket -> the batch sizes SGLang routes to it ("8-30")."""
    total_ms = sum(i.get("decode_ms") or 0.0 for i in infos)
    lines = []
    for info in infos:
        key = info["bucket"]
        name = f"bucket {key}" + (f" (batch {spans[key]})" if spans and spans.get(key) not in (None, "none") else "")
        if "candidate_steps" not in info:
            lines.append(f"{name}: {info['kept_default']}: SGLang's default "
                         f"{defaults[str(key)]['candidate_steps']} kept (its table knows acceptance, not cost; "
                         "log traffic at these batch sizes to price them)")
            continue
        head = f"{name}: candidate_steps {info['candidate_steps']}"
        if info.get("decode_ms") and total_ms > 0:
            info["decode_share"] = round(info["decode_ms"] / total_ms, 4)
            head += f" ({100 * info['decode_share']:.0f} % of the log's decode time)"
        label = info.get("modelled_from")
        kept = cycles.get(key, {}).get(label) if label else None
        if kept and kept["topk"] == 1:  # what SGLang's own rule would run on these cycles
            per = (periods or {}).get(key)
            r = replay(cfg[str(key)], replay_cycles(kept) if per else kept["accepted"], kept["steps"], top, per)
            info["sglang_slot_replay"] = r
            first = SlotRule(top, cfg[str(key)]).current  # the start chain, or its middle candidate
            n = len(set(cfg[str(key)]["candidate_steps"]))
            why = "" if first == top else (f" (its only candidate; the server starts at s{top})" if n == 1 else
                                           f" (its middle candidate: the server's start, s{top}, is not one)")
            head += (f"; SGLang's slot on these cycles, started at steps {first}{why}: "
                     + ", ".join(f"s{s} {100 * f:.0f} %" for s, f in r["share"].items()))
        against = []
        if kept and kept["topk"] == 1 and (periods or {}).get(key):
            against = [versus_default(info, defaults[str(key)], kept, periods[key])]
        elif info.get("modelled_share", 1) < 1:
            against = ["    not priced against SGLang's default: this bucket's cycles ran several steps values (an "
                       "adaptive server's log), so no one chain's cycles follow the text in order"]
        sizes = ", ".join(f"{bs} ({n})" for bs, n in info["batch_sizes"].items())
        lines += [head, *(f"    {part}" for part in split_reasons(info["why"])), *against,
                  f"    from {label} at batch {sizes}"]
    return lines


def versus_default(info: dict, default: dict, kept: dict, periods: dict) -> str:
    """One indented line: the file's entry and SGLang's default for the bucket, both priced by replaying
    SGLang's slot on the same cycles (the default started at its largest candidate, as the launch it
    needs on 0.5.17 does). Sets info["default_slot_replay"]."""
    ours, mine = info["sglang_slot_replay"].get("tok_s"), info["candidate_steps"]
    cands = sorted(default["candidate_steps"])
    d = replay(default, replay_cycles(kept), kept["steps"], max(cands), periods)
    info["default_slot_replay"] = {"candidate_steps": cands, **d}
    head = (f"    replayed cycle by cycle (the best line prices median cycles): this file's {mine} {ours:.0f} tok/s "
            "predicted") if ours else "    "
    if not ours or not d["tok_s"]:
        why = ("it has steps 0 and there is no baseline to price it" if 0 in cands and 0 not in periods
               else "a candidate has no price" if d["tok_s"] is None else "no tokens in its time")
        return f"{head}{'; ' if ours else ''}SGLang's default {cands} here not priced: {why}"
    shares = ", ".join(f"s{s} {100 * f:.0f} %" for s, f in d["share"].items())
    approx = ""
    above = [f"s{s}" for s, f in d["share"].items() if s > kept["steps"] and f > 0]
    if above:
        approx = (f"; approximate: {', '.join(above)} past the logged s{kept['steps']}, its acceptance capped at the "
                  "logged chain's")
    return f"{head}, SGLang's default {cands} {d['tok_s']:.0f} ({shares}{approx}): {ours / d['tok_s']:.2f}x SGLang's default"


def loses_to_default(info: dict) -> bool:
    """The bucket's chosen entry is predicted below SGLang's default for it by the same slot replay on
    the log's own cycles (versus_default's prices): adaptive_config then writes the default there."""
    ours = (info.get("sglang_slot_replay") or {}).get("tok_s")
    theirs = (info.get("default_slot_replay") or {}).get("tok_s")
    return bool(ours and theirs and ours < theirs and info["candidate_steps"] != info["default_slot_replay"]["candidate_steps"])


def fixed_chain_line(n: int, written: int | None = None, gain: float | None = None) -> str:
    """The leading line when every logged bucket runs one fixed chain (`written`, default n): the file
    adds nothing there over a fixed server at steps n, the chain the verdict names; `gain`: the written
    chain's predicted tok/s over n's, less 1 (at most 120 characters, as every verdict line; the
    server's flags are in the closing line)."""
    if written is None or written == n:
        return (f"no gain over a fixed server at steps {n}: every logged bucket runs s{n} alone; "
                "serve that (flags: last line)")
    line = (f"no gain over a fixed server at steps {n}: each logged bucket runs s{written} alone{{}}; "
            f"serve s{n} (flags: last line)")
    by = "" if gain is None else f" ({100 * gain:+.1f} % predicted)"
    return line.format(by) if len(line.format(by)) <= 120 else line.format("")


def per_bucket_line(infos: list[dict], spans: dict, top: int) -> list[str]:
    """[the leading line] when the logged buckets got different entries: the file's answer is per batch size,
    where the shared verdict above it names one chain for the whole log; [] when they agree."""
    chosen = [i for i in infos if "candidate_steps" in i]
    if len({tuple(i["candidate_steps"]) for i in chosen}) < 2:
        return []
    span = {k: v for k, v in (spans or {}).items() if v not in (None, "none")}
    parts = [(f"batch {span[i['bucket']]}" if i["bucket"] in span else f"bucket {i['bucket']}")
             + f" {i['candidate_steps']}" for i in chosen]
    line = f"this file instead, per batch size: {', '.join(parts)}; the server starts at s{top} (last line)"
    return [line if len(line) <= 120 else
            f"this file instead: {len(chosen)} buckets, each its own candidates (below); the server starts at s{top}"]


def plain_wins_everywhere(infos: list[dict]) -> str | None:
    """The leading line when a baseline says plain decode beats every chain in every bucket chosen from
    the log ([0] there, or chains kept because SGLang's steps 0 costs more than a plain server's step),
    else None: the answer for the logged traffic is no speculation at all."""
    chosen = [i for i in infos if "candidate_steps" in i]
    if not chosen or any(i["candidate_steps"] != [0] and not i.get("plain_server_wins") for i in chosen):
        return None
    sizes = sorted({int(bs) for i in chosen for bs in (i.get("batch_sizes") or {})})
    head = (f"plain decode beats every chain in every logged bucket (batch {', '.join(map(str, sizes))}): serve "
            "without speculation (no --speculative-algorithm); ")
    if all(i["candidate_steps"] == [0] for i in chosen):
        return head + "the file matters only for traffic in the buckets the log lacks, which keep SGLang's defaults"
    if any(0 in i["candidate_steps"] for i in chosen):  # a pair with 0 the set replay priced
        return head + "to speculate anyway, the file holds the fastest candidates the replay priced there"
    return head + ("to speculate anyway, the file holds the fastest chains there (SGLang's steps 0 costs more than "
                   "a plain step, so it is not written as a candidate)")


def launch_line(out, server_flags: list[str], top: int, plain_everywhere: bool = False,
                zero_everywhere: bool = True, fixed: int | None = None) -> str:
    """The closing line: the flags to run the server with, which replace its own steps flags; with
    `fixed` (every logged bucket one chain) no switch to adaptive: the fixed server is the answer."""
    if fixed is not None:
        return (f"wrote {out}: for the logged traffic a fixed server at steps {fixed} does as well (first lines): "
                f"--speculative-num-steps {fixed} --speculative-eagle-topk 1 --speculative-num-draft-tokens {fixed + 1}"
                "; the file only differs in the buckets the log lacks, which keep SGLang's defaults")
    line = f"wrote {out}: run the EAGLE3 server with {' '.join(server_flags)}"
    if plain_everywhere:
        where = "in the unlogged buckets" if zero_everywhere else "anyway"
        line = (f"wrote {out}: for the logged traffic serve without speculation (first line); only to speculate "
                f"{where}, run the EAGLE3 server with {' '.join(server_flags)}")
    if top > 0:
        line += (f" (in place of your own {STEPS_FLAGS}: it starts at the largest candidate, as SGLang sizes its "
                 "CUDA-graph buffers from the starting steps)")
    return line
