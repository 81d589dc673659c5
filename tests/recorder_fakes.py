"""Fake CUDA events for the timing recorder tests (test_recorder.py, test_recorder_hooks.py,
test_recorder_runtime.py).

There is no CUDA here, so `torch.cuda.Event` cannot be created: the recorder takes its event class
by injection (`event_factory`) and the tests inject `FakeEvent`. A fake GPU stream stands in for
the device: `record()` stamps the stream's current time (ms, advanced by the test), `query()` is
True once the stream has executed past that stamp (`done_until`, set by the test), and
`elapsed_time()` is the difference of two stamps, like the real event API.

`make` builds a CycleRecorder on one fake stream and a fake host clock, emitting into a list;
`decode_cycle` runs one cycle on it.
"""
from __future__ import annotations

import math

from sglang_patches.server.timing.recorder import CycleRecorder


class FakeStream:
    def __init__(self):
        self.t = 0.0               # GPU-stream time in ms at the next record()
        self.done_until = math.inf  # events stamped at or before this are complete
        self.created = 0
        self.queries = 0
        self.elapsed_calls = 0


class FakeEvent:
    """Stand-in for torch.cuda.Event(enable_timing=True): no CUDA on this machine."""

    def __init__(self, stream: FakeStream):
        self.stream = stream
        self.stamp = None
        stream.created += 1

    def record(self):
        self.stamp = self.stream.t

    def query(self):
        self.stream.queries += 1
        return self.stamp is not None and self.stamp <= self.stream.done_until

    def elapsed_time(self, end):
        self.stream.elapsed_calls += 1
        assert self.stamp is not None and end.stamp is not None
        return end.stamp - self.stamp


class HostClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def make(pool_size=8, **kw):
    stream, clock, out = FakeStream(), HostClock(), []
    rec = CycleRecorder(lambda: FakeEvent(stream), rank=kw.pop("rank", 0), sinks=[out.append],
                        pool_size=pool_size, clock=clock, wall=lambda: 1.7e9 + clock.now, **kw)
    return rec, stream, clock, out


def decode_cycle(rec, stream, draft=2.0, verify=6.0, extend=1.5, pre=0.5, post=0.25, bs=4, kind="decode"):
    """One cycle on the fake stream: pre | draft | verify | extend | post (ms)."""
    slot = rec.begin(kind, bs, 3, 1, 4)
    stream.t += pre
    for name, ms in (("draft", draft), ("verify", verify), ("extend", extend)):
        if ms is None:
            continue
        rec.phase(name, True)
        stream.t += ms
        rec.phase(name, False)
    stream.t += post
    rec.end(slot)
    return slot
