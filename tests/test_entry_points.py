"""The overlay's entry points into SGLang on the real classes of the version under test (0.5.17 and
0.5.23 runs): `sglang_patches.Engine` subclasses SGLang's real Engine and hands every scheduler
our entry; `scheduler_entry.run_scheduler_process` applies the overlay to the real SGLang classes
in the process and then calls SGLang's own run_scheduler_process with exactly the arguments it got.

MOCKED, because a scheduler cannot run on CPU (it builds a model runner on a GPU): SGLang's
run_scheduler_process itself, replaced by a recorder for the duration of one test; and SGLang's
Engine.__init__ (it starts those schedulers), replaced the same way."""
from __future__ import annotations

import inspect
import pickle

import pytest

pytest.importorskip("sglang")


@pytest.fixture
def clean(monkeypatch):
    from sglang_patches.server.hooks import REGISTRY
    from sglang_patches.server.patches import catalog

    monkeypatch.delenv("SGLANG_PATCHES_CONFIG", raising=False)
    assert catalog._applied_in_process == [] and REGISTRY.applied == []
    yield catalog
    catalog.undo_overlay()
    assert REGISTRY.applied == []


def test_engine_subclasses_sglangs_engine_and_hands_schedulers_our_entry():
    from sglang.srt.entrypoints.engine import Engine as SGLangEngine

    from sglang_patches import Engine

    from sglang_patches.server import scheduler_entry

    assert issubclass(Engine, SGLangEngine) and Engine.__mro__[1] is SGLangEngine
    # SGLang's Engine starts its schedulers through this class attribute (the contact ENGINE_SCHEDULER_FUNC)
    assert "run_scheduler_process_func" in vars(SGLangEngine)
    assert inspect.getattr_static(Engine, "run_scheduler_process_func").__func__ is scheduler_entry.run_scheduler_process
    # spawned by reference: it must survive pickling as a module-level function
    assert pickle.loads(pickle.dumps(scheduler_entry.run_scheduler_process)) is scheduler_entry.run_scheduler_process


def test_engine_passes_the_overlay_through_the_environment(clean, monkeypatch):
    import json
    import os

    from sglang_patches import engine as engine_mod

    got = []
    monkeypatch.setattr(engine_mod._SGLangEngine, "__init__", lambda self, **kw: got.append(kw))
    engine_mod.Engine(model_path="/m", overlay={"timing_log": "/tmp/x.jsonl", "patches": ("marker", "checks")},
                      tp_size=1)
    assert got == [{"model_path": "/m", "tp_size": 1}]  # SGLang gets its own arguments only
    cfg = json.loads(os.environ["SGLANG_PATCHES_CONFIG"])
    assert cfg["timing_log"] == "/tmp/x.jsonl" and cfg["patches"] == ["marker", "checks"]


def test_scheduler_entry_applies_the_overlay_then_runs_sglangs_scheduler(clean, monkeypatch):
    from sglang.srt.managers import scheduler as sched_mod
    from sglang.srt.managers.scheduler import Scheduler

    from sglang_patches import compat

    from sglang_patches.server import hooks, scheduler_entry
    from sglang_patches.vocab.overlay_config import ENV_VAR, OverlayConfig

    assert compat.current().RUN_SCHEDULER_PROCESS.resolve() is sched_mod.run_scheduler_process
    stock = Scheduler.get_internal_state
    calls = []

    def sglang_scheduler(*args, **kwargs):  # stands in for the GPU-bound scheduler loop
        calls.append((args, kwargs, hooks.is_patched(Scheduler.get_internal_state)))
        return "scheduler exited"

    monkeypatch.setattr(sched_mod, "run_scheduler_process", sglang_scheduler)
    monkeypatch.setenv(ENV_VAR, OverlayConfig(patches=("marker", "checks")).to_env())
    out = scheduler_entry.run_scheduler_process("server_args", "port_args", 0, tp_rank=0, pipe_writer=None)
    assert out == "scheduler exited"
    assert calls == [(("server_args", "port_args", 0), {"tp_rank": 0, "pipe_writer": None}, True)]
    assert {h.spec.feature for h in clean._applied_in_process} == {"marker", "checks"}
    clean.undo_overlay()
    assert Scheduler.get_internal_state is stock
