"""SGLang's per-bucket step rule (speculative/adaptive_spec_params.py: AdaptiveStepSlot, the same in 0.5.17
and 0.5.23), copied so that `advise --adaptive-config` can say which candidate SGLang would run on a log's
own acceptance without importing SGLang; tests/test_adaptive_slot.py drives this copy and the real class
of each supported version with the same feeds and compares every decision.

The rule: an EMA (alpha 0.2) of the mean accepted drafts per request of each verify; no decision in the
first `warmup_batches` verifies, then one every `update_interval`. A decision steps down while the EMA
is <= the lower candidate - 0.5 (0.5 when that candidate is 0) + down_hysteresis, else up while it is
> the current candidate - 0.5 + up_hysteresis; from 0 it moves to the next candidate unconditionally.
A ceiling_coeff > 0 caps downward moves at ceil(ema * coeff).

replay() feeds a bucket's logged cycles (logged at `logged_steps`, topk 1) through the rule: at steps s
a request's accepted drafts are min(a, s), exact by truncation for s <= logged_steps (a chain accepts
its first k drafts independently of what is drafted after them); at s = 0 every request counts 0.

prefer_start() keeps a bucket on the server's start chain where that is one of its candidates: SGLang
runs any other steps value on a runtime state it swaps in (EAGLEWorkerV2.apply_runtime_state), whose
cycles have run up to 12 % slower than the fixed chain's (not always; docs/adaptive.md).
"""
from __future__ import annotations

import math

from sglang_patches.whatif.cost_model import nearest_batch


class SlotRule:
    def __init__(self, initial_steps: int, cfg: dict):
        self.candidates = sorted(set(cfg["candidate_steps"]))
        self.ema_alpha = cfg.get("ema_alpha", 0.2)
        self.update_interval = cfg.get("update_interval", 5)
        self.warmup_batches = cfg.get("warmup_batches", 10)
        self.down_hysteresis = cfg.get("down_hysteresis", -0.25)
        self.up_hysteresis = cfg.get("up_hysteresis", 0.0)
        self.ceiling_coeff = cfg.get("ceiling_coeff", 0)
        self.current = (initial_steps if initial_steps in self.candidates
                        else self.candidates[len(self.candidates) // 2])
        self.ema = float(self.current - 1)
        self.batches = 0

    def update(self, accepted: list[int]) -> None:
        if not accepted:
            return
        if self.current > 0:
            self.ema = (1 - self.ema_alpha) * self.ema + self.ema_alpha * sum(accepted) / len(accepted)
        self.batches += 1
        if self.batches <= self.warmup_batches or (self.batches - self.warmup_batches) % self.update_interval:
            return
        self._decide()

    def _decide(self) -> None:
        c, old = self.candidates, self.current
        i = old_i = c.index(old)
        if old == 0:
            i = min(i + 1, len(c) - 1)
            if c[i] > 0 and self.ema < 0:
                self.ema = float(c[i] - 1)
            self.current = c[i]
            return
        while i > 0:
            threshold = (0.5 if c[i - 1] == 0 else c[i - 1] - 0.5) + self.down_hysteresis
            if self.ema > threshold:
                break
            i -= 1
        if i == old_i:
            while i < len(c) - 1 and self.ema > c[i] - 0.5 + self.up_hysteresis:
                i += 1
        if self.ceiling_coeff > 0:
            ceiling = max(1, math.ceil(self.ema * self.ceiling_coeff))
            if ceiling < c[i] <= old:
                while i > 0 and c[i] > ceiling:
                    i -= 1
        self.current = c[i]


def replay(entry: dict, cycles: list[list[int]], logged_steps: int, initial_steps: int,
           periods: dict[int, dict[int, float]] | None = None) -> dict:
    """{"share": {steps: fraction of the cycles run at it}, "cycles": n, "above_logged": fraction run
    above logged_steps (their acceptance capped at the logged chain's: a lower bound)}. With `periods`
    (steps -> batch size -> ms from one cycle's start to the next), also "tok_s": each cycle costs its
    chain's period at its batch size (the nearest priced one) and yields min(a, s) + 1 tokens per request
    (one at steps 0); None when a candidate has no period."""
    slot = SlotRule(initial_steps, entry)
    counts: dict[int, int] = {}
    above = tokens = 0
    ms = 0.0
    priced = periods is not None and all(s in periods and periods[s] for s in slot.candidates)
    size_of: dict[tuple[int, int], int] = {}  # (steps, logged batch size) -> the priced batch size
    for accepted in cycles:
        s = slot.current
        counts[s] = counts.get(s, 0) + 1
        above += s > logged_steps
        ran = [0] * len(accepted) if s == 0 else [min(a, s) for a in accepted]
        if priced:
            per, n = periods[s], len(accepted)
            if (s, n) not in size_of:
                size_of[s, n] = n if n in per else nearest_batch(per, n)
            ms += per[size_of[s, n]]
            tokens += sum(ran) + len(ran)
        slot.update(ran)
    n = len(cycles)
    out = {"share": {s: round(k / n, 3) for s, k in sorted(counts.items())} if n else {}, "cycles": n,
           "above_logged": round(above / n, 3) if n else 0.0}
    if periods is not None:
        out["tok_s"] = round(tokens * 1000.0 / ms, 1) if priced and ms > 0 else None
    return out


def prefer_start(cfg: dict, infos: list[dict], top: int) -> None:
    """A bucket chosen from the log whose candidates include the start chain `top` (the file's
    largest) runs it alone: no swapped runtime state, whose cycles cost more than the margin. A pair
    the set replay chose (adaptive_sets: it beat every single chain by more than the margin) stays."""
    for info in infos:
        cands = info.get("candidate_steps")
        if cands and top in cands and cands != [top] and not info.get("set_from_replay"):
            info["candidate_steps"] = cfg[str(info["bucket"])]["candidate_steps"] = [top]
            best, *rest = info["why"].split("; ")  # said right after the best chain it overrides
            info["why"] = "; ".join([best, f"s{top} alone of {cands}: the server starts there, and another steps value "
                                     "runs on a runtime state SGLang swaps in, whose cycles have run up to 12 % slower", *rest])
