"""timing.runtime: the per-process timing state, which rank records (get_or_create_recorder), and
the `simulated` mark on every record under either acceptance simulation.

There is no CUDA here: where a real recorder is created, torch's CUDA device query and event class
are replaced by the fakes of tests/recorder_fakes.py; the recorder and its sinks are real.
"""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from recorder_fakes import FakeEvent, FakeStream
from sglang_patches.server.timing import runtime


# ---------------------------------------------------------------- timing state

def test_timing_state_getter_and_non_recording_rank():
    from sglang_patches.vocab.overlay_config import OverlayConfig
    from sglang_patches.server.patches import marker

    state = runtime.configure(OverlayConfig(timing_all_ranks=False))
    assert runtime.get_timing_state() is state and state.recorder is None and not state.decided
    rank1 = SimpleNamespace(ps=SimpleNamespace(tp_rank=1), tp_rank=1)
    assert runtime.get_or_create_recorder(rank1) is None  # only TP rank 0 records by default
    assert state.decided and state.rank == 1 and runtime.active() is None
    # decided once per process: a later call (even from a rank-0-looking worker) creates nothing
    assert runtime.get_or_create_recorder(SimpleNamespace(tp_rank=0)) is None
    info = marker.overlay_info()
    assert info["tp_rank"] == 1 and info["spec_timing"] is None
    assert runtime.reset_stats() is False  # nothing records here
    assert runtime.configure(OverlayConfig()) is not state  # a fresh state per configure()


@pytest.mark.parametrize("env,config_rates,expected", [
    ({"SGLANG_SIMULATE_ACC_LEN": "3.3"}, None, True),    # SGLang's own simulation
    ({"SGLANG_SIMULATE_ACC_LEN": "-1"}, None, False),    # SGLang's default: off
    ({}, (0.8, 0.7), True),                               # ours
    ({}, None, False),
])
def test_records_are_marked_simulated_under_either_simulation(monkeypatch, env, config_rates, expected):
    """get_or_create_recorder marks every record `simulated` when acceptance is pinned by SGLang's
    SGLANG_SIMULATE_ACC_LEN as well as by --simulate-acceptance (before, only the latter). torch's
    CUDA device query and events are replaced (no GPU here); the recorder and its sinks are real."""
    import torch

    from sglang_patches.vocab.overlay_config import OverlayConfig

    monkeypatch.delenv("SGLANG_SIMULATE_ACC_LEN", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    stream = FakeStream()
    monkeypatch.setattr(torch.cuda, "Event", lambda enable_timing=True: FakeEvent(stream))
    monkeypatch.setattr(runtime.atexit, "register", lambda fn: fn)  # its exit flush syncs CUDA
    cfg = OverlayConfig(simulate_acceptance=config_rates) if config_rates else OverlayConfig()
    runtime.configure(cfg)
    worker = SimpleNamespace(tp_rank=0, server_args=SimpleNamespace(enable_metrics=False))
    rec = runtime.get_or_create_recorder(worker)
    got = []
    rec.sinks.append(got.append)
    slot = rec.begin("decode", 1, 3, 1, 4)
    rec.end(slot)
    rec.set_accepted(slot, [2])
    rec.flush(wait=lambda: None)
    assert got and all(r["simulated"] is expected for r in got)
    runtime.configure(OverlayConfig())
