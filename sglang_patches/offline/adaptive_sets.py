"""Candidate sets priced by replaying SGLang's slot over a bucket's own logged cycles.

The advisor prices one chain at a time from its mean acceptance. SGLang's slot moves among the
candidates as acceptance moves, so a set is worth more or less than its members: {1, 5} runs steps 5
where drafts are accepted and drops to steps 1 (no drafter forward after the first draft) where they are
rejected, a cost no single chain's mean shows. Here each logged cycle is replayed at the steps the slot
holds then (adaptive_slot.replay, SGLang's own rule), costed at the advisor's period for that chain and
batch size (cycle plus gap, with the chain's phase changes: whatif/advisor.predict's by_bs), and credited
min(a, s) + 1 tokens per request; steps 0 at SGLang's steps-0 price (adaptive_choice.steps0_ms), one
token per request. tok/s = tokens / time over the bucket's cycles.

One logged cycle stands for one cycle of whichever chain runs it, and a shorter chain's acceptance is
the logged one truncated. On text of long easy spans that reads a shorter chain low: it would start its
cycles elsewhere in the text and cross the spans differently (the advisor's span replay, docs/advisor.md,
is the closer estimate there). A pair's shorter member runs mostly where drafts are rejected, where the
truncation is near exact, so the replay reads single short chains lower than pairs. Hence a pair is held
to the advisor's own best chain at its own price as well as to the replayed singles.

A pair is written only where it beats every single chain by more than NEAR: the model's error is of that
order, and SGLang runs a steps value other than the server's start on a runtime state it swaps in
(docs/adaptive.md: 0-12 % per cycle on stock 0.5.17, about 0 with the adaptive_graphs feature). SGLang's
default entry for the bucket is replayed beside it, so each bucket says what its table would have given
on the same cycles. Every replay of a bucket runs on the same cycles (replay_cycles).
"""
from __future__ import annotations

from itertools import combinations

from sglang_patches.offline.adaptive_choice import NEAR
from sglang_patches.offline.adaptive_slot import replay
from sglang_patches.whatif import advisor as adv

PRICE_MAX_CYCLES = 50_000  # per bucket: past this, evenly spaced runs of the log (each priced set replays them)
PRICE_CHUNKS = 20


def at_batch_sizes(kept: dict | None, sizes) -> dict | None:
    """A bucket's kept cycles cut to the batch sizes the advisor priced (`sizes`; the ramp's thin ones are
    left out there): a replay prices each cycle at its nearest priced batch size, so a batch-7 ramp cycle
    kept beside batch-1 ones would cost a batch-1 period and yield seven requests' tokens."""
    if kept is None or "bs" not in kept:  # cycles kept without their batch sizes: nothing to cut by
        return kept
    sizes = {int(b) for b in sizes}  # a JSON round-trip's string keys name the same batch sizes
    keep = [i for i, bs in enumerate(kept["bs"]) if bs in sizes]
    return {**kept, "accepted": [kept["accepted"][i] for i in keep], "bs": [kept["bs"][i] for i in keep]}


def replay_cycles(kept: dict) -> list:
    """The cycles every replay of a bucket runs on: all of them up to PRICE_MAX_CYCLES, else PRICE_CHUNKS
    evenly spaced runs of consecutive cycles (the slot carries its state across a run's edge)."""
    acc = kept["accepted"]
    if len(acc) <= PRICE_MAX_CYCLES:
        return acc
    run = PRICE_MAX_CYCLES // PRICE_CHUNKS
    starts = [i * (len(acc) - run) // (PRICE_CHUNKS - 1) for i in range(PRICE_CHUNKS)]  # the first at 0, the last at the end
    return [a for s in starts for a in acc[s:s + run]]


def periods_by_steps(obs, steps_max: int, cal=None, zero_ms: dict[int, float] | None = None) -> dict:
    """steps -> batch size -> the advisor's period (ms) of that chain there, for steps 1..steps_max
    (past the logged steps: the advisor's extrapolated rows), and 0 at `zero_ms` when given."""
    rows = adv.predict(obs, range(1, max(steps_max, 1) + 1), None, cal)
    out = {r.steps: {b["bs"]: b["cycle_ms"] for b in r.by_bs} for r in rows}
    if zero_ms:
        out[0] = dict(zero_ms)
    return out


def price(candidates, hyst: dict, kept: dict, periods: dict, initial: int | None = None) -> dict:
    """SGLang's slot over a bucket's kept cycles ({"steps", "accepted"}: read_buckets' record) with
    these candidates and the bucket's hysteresis keys; initial: where the server starts (default the
    largest candidate). replay's dict, with tok_s."""
    cands = sorted(set(candidates))
    return replay({**hyst, "candidate_steps": cands}, replay_cycles(kept), kept["steps"],
                  max(cands) if initial is None else initial, periods)


def best_pair(kept: dict, hyst: dict, periods: dict, allowed: list[int],
              advised: tuple[int, float] | None = None) -> dict | None:
    """The pair of `allowed` steps values (0 among them only where periods price it) that the replay
    prices above every single one by more than NEAR: {"candidate_steps", "tok_s", "share",
    "single": (steps, tok_s) of the best single chain}; None where no pair clears that. `advised`:
    the advisor's own best chain (steps, tok/s), also a single to beat: its accept length for a chain
    shorter than logged is the span replay, which on text of long easy spans reads above the
    truncation this replay uses (docs/advisor.md), so the pair is held to the higher of the two."""
    steps = sorted(s for s in set(allowed) if s in periods and s <= kept["steps"])
    if len(steps) < 2:
        return None
    kept = {"steps": kept["steps"], "accepted": replay_cycles(kept)}  # picked once: each set below replays it
    singles = {s: price([s], hyst, kept, periods)["tok_s"] for s in steps}
    if any(v is None for v in singles.values()):
        return None
    if advised is not None and advised[1] > singles.get(advised[0], 0.0):
        singles[advised[0]] = advised[1]
    best_s = max(singles, key=lambda s: (singles[s], -s))
    top = None
    for lo, hi in combinations(steps, 2):
        r = price([lo, hi], hyst, kept, periods)
        if r["tok_s"] is not None and (top is None or r["tok_s"] > top["tok_s"]):
            top = {"candidate_steps": [lo, hi], "tok_s": r["tok_s"], "share": r["share"]}
    if top is None or not singles[best_s] > 0 or top["tok_s"] <= singles[best_s] * (1 + NEAR):
        return None
    return {**top, "single": (best_s, singles[best_s])}
