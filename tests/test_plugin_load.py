"""The SGLang plugin entry point (`SGLANG_PATCHES_ENABLE`): off by default, what turns it on, the overlay
it applies in this process, its registration where SGLang looks for plugins, and the deliberate stop it
sets up in the process of SGLang's server CLI; against the real SGLang under test (0.5.17 and 0.5.23 runs)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from conftest import sglang_under_test

from sglang_patches import plugin
from sglang_patches.server.hooks import REGISTRY
from sglang_patches.vocab.overlay_config import ENV_VAR, OverlayConfig

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def clean_overlay():
    from sglang_patches.server.patches import catalog

    assert catalog._applied_in_process == [] and REGISTRY.applied == []
    yield catalog
    catalog.undo_overlay()
    assert REGISTRY.applied == []


def test_plugin_off_by_default(clean_overlay, monkeypatch, capsys):
    monkeypatch.delenv(plugin.ENABLE_ENV, raising=False)
    plugin.load()
    for off in ("0", "false", "OFF", ""):
        monkeypatch.setenv(plugin.ENABLE_ENV, off)
        plugin.load()
    assert clean_overlay._applied_in_process == [] and REGISTRY.applied == []
    capsys.readouterr()
    monkeypatch.setenv(plugin.ENABLE_ENV, "maybe")  # neither on nor off: said, and off (never a stop: the
    plugin.load()                                   # launcher and sglang_patches.Engine load plugins too)
    assert REGISTRY.applied == []
    assert capsys.readouterr().err == ("sglang-patches: warning: SGLANG_PATCHES_ENABLE='maybe' is neither on (1, true, "
                                       "yes, on) nor off (0, false, no, off); the plugin stays off in this process\n")


def test_plugin_takes_true_as_on(clean_overlay, monkeypatch):
    monkeypatch.setenv(plugin.ENABLE_ENV, "True")
    monkeypatch.setenv(ENV_VAR, OverlayConfig(patches=("marker",)).to_env())
    plugin.load()
    assert [h.spec.feature for h in REGISTRY.applied] == ["marker", "marker"]


def test_plugin_applies_overlay_when_enabled(clean_overlay, monkeypatch):
    from sglang.srt.managers.scheduler import Scheduler
    from sglang.srt.speculative.eagle_worker_v2 import EAGLEWorkerV2

    from sglang_patches.server.hooks import is_patched

    original = EAGLEWorkerV2.__dict__["forward_batch_generation"]
    monkeypatch.setenv(plugin.ENABLE_ENV, "1")
    monkeypatch.delenv(ENV_VAR, raising=False)
    plugin.load()
    # 11 overlay hooks; on 0.5.23 also the refusal of --pp-size > 1 with timing at Engine._launch_subprocesses
    assert len(REGISTRY.applied) == (12 if sglang_under_test() == "0.5.23" else 11)
    assert is_patched(EAGLEWorkerV2.__dict__["forward_batch_generation"])
    clean_overlay.undo_overlay()
    assert EAGLEWorkerV2.__dict__["forward_batch_generation"] is original

    monkeypatch.setenv(ENV_VAR, OverlayConfig(patches=("marker",)).to_env())
    plugin.load()
    assert [h.spec.feature for h in REGISTRY.applied] == ["marker", "marker"]
    assert is_patched(Scheduler.__dict__["get_internal_state"])
    assert not is_patched(EAGLEWorkerV2.__dict__["forward_batch_generation"])


def test_entry_point_registered_and_found_by_sglang():
    from importlib.metadata import entry_points

    from sglang.srt.plugins import GENERAL_PLUGINS_GROUP, load_plugins_by_group

    assert GENERAL_PLUGINS_GROUP == "sglang.srt.plugins"
    eps = [ep for ep in entry_points(group="sglang.srt.plugins") if ep.name == "sglang_patches"]
    assert len(eps) == 1 and eps[0].value == "sglang_patches.plugin:load"
    assert eps[0].load() is plugin.load
    found = load_plugins_by_group("sglang.srt.plugins")  # SGLang's own discovery (loads, runs nothing)
    assert found["sglang_patches"][0] is plugin.load


# ---------------------------------------------------------------- OverlayConfig


def _child_stop_handler(q):
    """In a spawned process (as SGLang spawns schedulers): what plugin.load() leaves for SIGUSR1."""
    import signal

    from sglang_patches.server import deliberate_stop

    from sglang_patches import plugin as plg
    from sglang_patches.server.patches import catalog

    plg.load()
    h = signal.getsignal(deliberate_stop.STOP_SIGNAL)
    q.put(getattr(h, "__module__", str(h)))
    catalog.undo_overlay()


def test_plugin_exit_makes_the_launching_process_the_stop_target(clean_overlay, monkeypatch):
    """Plain `sglang serve` with the plugin and on_accept_collapse exit: the CLI process gets the
    deliberate-stop handler and publishes its pid for the schedulers (so the alarm stops the server
    at once, not through SGLang's 60 s crash path); a spawned child (a scheduler) installs nothing;
    with warn nothing is installed anywhere."""
    import multiprocessing as mp
    import os
    import signal

    from sglang_patches.server import deliberate_stop
    from sglang_patches.vocab.overlay_config import SERVER_PID_ENV

    before = signal.getsignal(deliberate_stop.STOP_SIGNAL)
    monkeypatch.setenv(plugin.ENABLE_ENV, "1")
    monkeypatch.delenv(SERVER_PID_ENV, raising=False)
    monkeypatch.setattr(sys, "argv", ["/venv/bin/sglang", "serve", "--model-path", "m"])  # as `sglang serve`
    try:
        monkeypatch.setenv(ENV_VAR, OverlayConfig(patches=("marker",)).to_env())  # warn (default)
        plugin.load()
        assert signal.getsignal(deliberate_stop.STOP_SIGNAL) is before and SERVER_PID_ENV not in os.environ
        clean_overlay.undo_overlay()

        monkeypatch.setenv(ENV_VAR, OverlayConfig(patches=("marker",), on_accept_collapse="exit").to_env())
        plugin.load()
        assert signal.getsignal(deliberate_stop.STOP_SIGNAL).__module__ == "sglang_patches.server.deliberate_stop"
        assert os.environ[SERVER_PID_ENV] == str(os.getpid())
        clean_overlay.undo_overlay()

        q = mp.get_context("spawn").Queue()
        p = mp.get_context("spawn").Process(target=_child_stop_handler, args=(q,))
        p.start()
        got = q.get(timeout=120)
        p.join(60)
        assert got != "sglang_patches.server.deliberate_stop", got  # the scheduler side only signals
    finally:
        signal.signal(deliberate_stop.STOP_SIGNAL, before)
        os.environ.pop(SERVER_PID_ENV, None)


def test_plugin_leaves_an_engine_users_process_alone(clean_overlay, monkeypatch):
    """sglang.Engine loads plugins in the user's own process (pytest here plays that part): its
    SIGUSR1 must not be taken over, even with on_accept_collapse exit."""
    import os
    import signal

    from sglang_patches.server import deliberate_stop
    from sglang_patches.vocab.overlay_config import SERVER_PID_ENV

    before = signal.getsignal(deliberate_stop.STOP_SIGNAL)
    monkeypatch.setenv(plugin.ENABLE_ENV, "1")
    monkeypatch.delenv(SERVER_PID_ENV, raising=False)
    monkeypatch.setenv(ENV_VAR, OverlayConfig(patches=("marker",), on_accept_collapse="exit").to_env())
    plugin.load()
    assert signal.getsignal(deliberate_stop.STOP_SIGNAL) is before and SERVER_PID_ENV not in os.environ


@pytest.mark.parametrize("argv,spec,expected", [
    (["/v/bin/sglang", "serve", "--model-path", "m"], None, True),
    (["/v/lib/sglang/launch_server.py", "--model-path", "m"], "sglang.launch_server", True),
    (["/v/bin/sglang", "generate"], None, False),
    (["train.py"], None, False),                      # an Engine user's script
    ([], None, False),
])
def test_which_process_is_sglangs_server_cli(argv, spec, expected):
    from types import SimpleNamespace

    main = SimpleNamespace(__spec__=SimpleNamespace(name=spec) if spec else None)
    assert plugin._is_sglang_server_cli(argv, main) is expected
