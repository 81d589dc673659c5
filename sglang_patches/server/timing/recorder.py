"""Per-cycle GPU phase recorder: events are recorded on the hot path, read only once complete.

Hot path (inside the EAGLE worker, once per cycle): `begin()` takes a pre-allocated slot of
events and records the cycle start; `phase(name, start)` records a phase boundary; `shape()` sets the steps / draft tokens the cycle
ran with (under `--speculative-adaptive` SGLang switches them inside the forward call, so the hook
reads them after it returns); `end()` records the cycle end and queues the cycle. Nothing there
synchronizes or allocates. A slot's events do not depend on the steps: one event pair per phase
(a cycle of any candidate steps uses the same slot), so the pool is allocated once.

Cold path: `set_accepted()` is called from the scheduler's result processing, after SGLang has
itself waited for the cycle's copy-done event, so that cycle's events are complete. `drain()`
resolves queued cycles in order, but only those whose end event `query()`s complete (a non-blocking
check), turns them into schema records, hands them to the sinks and returns their slots.

The event source is injected (`event_factory`) so the logic is tested on CPU with fake events;
on the GPU it is `torch.cuda.Event(enable_timing=True)`.
"""
from __future__ import annotations

import collections
import logging
import time
from typing import Callable, Iterable

from sglang_patches.vocab.schema import PHASES, make_record

logger = logging.getLogger("sglang_patches.server.timing")

# The event slots of one cycle, named once. Each timed span has a start and an end event; a span's
# GPU time is start.elapsed_time(end) and lands in the record field f"{span}_ms". "cycle" brackets
# the whole forward_batch_generation; the others are the phases the hooks call `phase(span, ...)` for.
SPANS = ("cycle",) + PHASES  # ("cycle", "draft", "verify", "extend")
EVENT_SLOTS: dict[str, int] = {f"{span}_{edge}": 2 * i + j
                               for i, span in enumerate(SPANS) for j, edge in enumerate(("start", "end"))}
SPAN_SLOTS: dict[str, tuple[int, int]] = {span: (EVENT_SLOTS[f"{span}_start"], EVENT_SLOTS[f"{span}_end"])
                                          for span in SPANS}
CYCLE_START, CYCLE_END = SPAN_SLOTS["cycle"]


class _Slot:
    """One cycle's reusable events and metadata (allocated once, at recorder construction)."""

    __slots__ = ("events", "recorded", "kind", "t_wall", "host_gap_ms", "bs", "steps", "topk",
                 "draft_tokens", "accepted", "req", "stale", "ready", "age", "generation", "plain", "verified")

    def __init__(self, event_factory: Callable):
        self.events = [event_factory() for _ in EVENT_SLOTS]
        self.recorded = [False] * len(EVENT_SLOTS)
        self.generation = 0

    def reset(self, kind, t_wall, host_gap_ms, bs, steps, topk, draft_tokens):
        for i in range(len(self.recorded)):
            self.recorded[i] = False
        self.kind, self.t_wall, self.host_gap_ms = kind, t_wall, host_gap_ms
        self.bs, self.steps, self.topk, self.draft_tokens = bs, steps, topk, draft_tokens
        self.plain = False
        self.verified = None  # (spec_steps, draft_token_num) of the verify input, when the hook saw one
        self.accepted = None
        self.req = None
        self.stale = 0
        self.generation += 1
        self.ready = kind == "prefill"  # decode cycles wait for their accepted counts
        self.age = 0


class CycleRecorder:
    def __init__(self, event_factory: Callable, *, rank: int = 0, sinks: Iterable[Callable] = (),
                 pool_size: int = 256, clock: Callable[[], float] = time.perf_counter,
                 wall: Callable[[], float] = time.time, max_pending_age: int = 64, simulated: bool = False):
        self.rank = rank
        self.simulated = simulated  # every record says so (simulated acceptance: not real serving)
        self.sinks = list(sinks)
        self._clock, self._wall = clock, wall
        self._free = collections.deque(_Slot(event_factory) for _ in range(pool_size))
        self._pending: collections.deque[_Slot] = collections.deque()
        self._current: _Slot | None = None
        self._last_end_host: float | None = None
        self._cycle_id = 0
        self._max_pending_age = max_pending_age
        self.skipped_no_slot = 0
        self.shape_checked = 0   # cycles whose recorded shape was compared with their verify input's
        self.shape_mismatch = 0  # ... and differed from it (the record would name the wrong steps)
        self.dropped_incomplete = 0
        self.emitted = 0
        self._prev = None  # (slot, generation) of the last emitted cycle, for the GPU gap

    # ---- hot path -------------------------------------------------------------------------
    def begin(self, kind: str, bs: int, steps: int, topk: int, draft_tokens: int):
        now = self._clock()
        gap = None if self._last_end_host is None else (now - self._last_end_host) * 1e3
        if not self._free:
            self.drain()
            if not self._free:
                self.skipped_no_slot += 1
                self._current = None
                return None
        slot = self._free.popleft()
        slot.reset(kind, self._wall(), gap, bs, steps, topk, draft_tokens)
        slot.events[CYCLE_START].record()
        slot.recorded[CYCLE_START] = True
        self._current = slot
        return slot

    def phase(self, name: str, start: bool) -> None:
        slot = self._current
        if slot is None:
            return
        idx = SPAN_SLOTS[name][0 if start else 1]
        slot.events[idx].record()
        slot.recorded[idx] = True

    def shape(self, slot, steps: int, draft_tokens: int, plain: bool = False) -> None:
        """The steps / draft tokens that ran in `slot`'s cycle; `plain`: it drafted nothing (a
        steps-0 cycle of a speculative server)."""
        if slot is None:
            return
        slot.steps, slot.draft_tokens, slot.plain = steps, draft_tokens, plain
        if slot.verified is not None:
            self.shape_checked += 1
            if slot.verified != (steps, draft_tokens):
                if not self.shape_mismatch:
                    logger.warning("sglang_patches: timing recorded steps %d / draft tokens %d, but the cycle verified "
                                   "a tree of steps %d / draft tokens %d", steps, draft_tokens, *slot.verified)
                self.shape_mismatch += 1

    def verified_shape(self, steps, draft_tokens) -> None:
        """The shape of the verify input the current cycle verifies (an independent reading of what
        ran, compared in `shape()`)."""
        slot = self._current
        if slot is not None and isinstance(steps, int) and isinstance(draft_tokens, int):
            slot.verified = (steps, draft_tokens)

    def end(self, slot) -> None:
        if slot is None:
            return
        slot.events[CYCLE_END].record()
        slot.recorded[CYCLE_END] = True
        self._current = None
        self._last_end_host = self._clock()
        self._pending.append(slot)

    @property
    def current(self):
        return self._current

    # ---- cold path ------------------------------------------------------------------------
    def set_accepted(self, slot, accepted: list[int] | None, stale: int = 0, req: list[int] | None = None) -> None:
        """`req`: one 32-bit request tag per entry of `accepted` (schema.py), or None."""
        if slot is None:
            return
        slot.accepted = list(accepted) if accepted is not None else []
        slot.req = req if req is not None and len(req) == len(slot.accepted) else None
        slot.stale = stale
        slot.ready = True

    def drain(self) -> int:
        """Emit every queued cycle that is ready and complete, in order. Never blocks."""
        emitted = 0
        for slot in self._pending:
            slot.age += 1
        while self._pending:
            slot = self._pending[0]
            if not slot.ready:
                if slot.age <= self._max_pending_age:
                    break
                slot.accepted = []  # result never reached the processor (e.g. aborted batch)
            if not slot.events[CYCLE_END].query():
                if slot.age <= self._max_pending_age * 4:
                    break
                self._pending.popleft()
                self.dropped_incomplete += 1
                self._free.append(slot)
                continue
            self._pending.popleft()
            self._emit(slot)
            self._free.append(slot)
            emitted += 1
        return emitted

    def flush(self, wait: Callable[[], None] | None = None) -> int:
        """At shutdown: optionally wait for the device (`wait`), then emit everything queued."""
        if wait is not None:
            wait()
        for slot in self._pending:
            slot.ready = True
            if slot.accepted is None:
                slot.accepted = []
            slot.age = self._max_pending_age * 4 + 1
        return self.drain()

    @staticmethod
    def _span_ms(slot, span: str):
        start, end = SPAN_SLOTS[span]
        if not (slot.recorded[start] and slot.recorded[end]):
            return None
        return slot.events[start].elapsed_time(slot.events[end])

    def _gpu_gap(self, slot):
        """GPU-stream time from the previous timed cycle's end to this cycle's start."""
        if self._prev is None:
            return None
        prev_slot, prev_generation = self._prev
        if prev_slot.generation != prev_generation or not prev_slot.recorded[CYCLE_END]:
            return None  # the previous cycle's slot was reused since: its events are gone
        return prev_slot.events[CYCLE_END].elapsed_time(slot.events[CYCLE_START])

    def _emit(self, slot) -> None:
        gpu_gap = self._gpu_gap(slot)
        self._prev = (slot, slot.generation)
        rec = make_record(
            cycle=self._cycle_id, t=slot.t_wall, rank=self.rank, kind=slot.kind, bs=slot.bs,
            steps=slot.steps, topk=slot.topk, draft_tokens=slot.draft_tokens,
            accepted=slot.accepted or [],
            draft_ms=self._span_ms(slot, "draft"), verify_ms=self._span_ms(slot, "verify"),
            extend_ms=self._span_ms(slot, "extend"), cycle_ms=self._span_ms(slot, "cycle"),
            host_gap_ms=slot.host_gap_ms, gpu_gap_ms=gpu_gap, stale=slot.stale, simulated=self.simulated,
            req=slot.req if slot.accepted else None, plain=slot.plain)
        self._cycle_id += 1
        self.emitted += 1
        for sink in list(self.sinks):
            try:
                sink(rec)
            except Exception:  # noqa: BLE001 - a broken sink must never break serving
                logger.exception("sglang_patches: timing sink %r failed; removing it", sink)
                self.sinks.remove(sink)
