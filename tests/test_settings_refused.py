"""Settings of an SGLang version that a feature cannot follow yet (the compat file's REFUSED) are
refused in one line, exit 2, before anything starts: on 0.5.23 pipeline parallel (--pp-size > 1)
with timing, and SGLANG_ENABLE_DP_SPEC_PREFILL_COORDINATION with timing; through the drop-in
launcher, the plugin under `python -m sglang.launch_server`, and `sglang_patches.Engine`. On 0.5.17
(no such path) the same commands get past the refusal (to the next check: no CUDA GPU here)."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from conftest import needs_sglang, sglang_under_test

from sglang_patches import compat
from sglang_patches.errors import UserError

DP_ENV = "SGLANG_ENABLE_DP_SPEC_PREFILL_COORDINATION"
ON_0523 = needs_sglang("0.5.23", why="the refused settings are 0.5.23's (pp tail-draft, DP spec/prefill "
                                     "coordination); 0.5.17 has neither path")


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_PATCHES_") and k != DP_ENV}
    env.update(extra)
    return env


# ---------------------------------------------------------------- the declaration

def test_refused_settings_of_0523():
    refuse = compat.setting_refusal
    timing = ("marker", "timing", "checks")
    line = refuse("0.5.23", timing, pp_size=2, environ={})
    assert line.startswith("--pp-size 2 with the timing feature is refused on sglang 0.5.23: ")
    assert "draft(with_topology=True)" in line and "--patches all,-timing" in line
    assert refuse("0.5.23", timing, pp_size=1, environ={}) is None
    assert refuse("0.5.23", timing, pp_size=None, environ={}) is None  # not known where asked
    assert refuse("0.5.23", ("marker", "checks"), pp_size=4, environ={DP_ENV: "1"}) is None  # no timing
    for true in ("1", "true", "True", "YES", "y"):  # what SGLang's EnvBool reads as true
        line = refuse("0.5.23", timing, pp_size=None, environ={DP_ENV: true})
        assert line.startswith(f"{DP_ENV}={true} with the timing feature is refused on sglang 0.5.23: ")
        assert "unset it" in line
    for false in ("0", "false", "no", "", "maybe"):  # SGLang reads an unparsable value as its default (off)
        assert refuse("0.5.23", timing, pp_size=None, environ={DP_ENV: false}) is None
    assert refuse("0.5.23.post1", timing, pp_size=2, environ={}) is not None  # same compat file
    assert refuse("0.5.17", timing, pp_size=2, environ={DP_ENV: "1"}) is None  # 0.5.17 has no such path
    assert refuse("0.5.20", timing, pp_size=2, environ={DP_ENV: "1"}) is None  # served by the 0.5.17 file


def test_the_env_name_is_sglang_0523s(tmp_path):
    """The variable named in REFUSED is the one 0.5.23's source reads (a contact point, checked by AST)."""
    from sglang_patches.compat import v0_5_23

    site = os.environ.get("SGP_SGLANG_0523_SITE")
    if not site or not os.path.isdir(os.path.join(site, "sglang")):
        pytest.skip("sglang 0.5.23 sources not installed (tests/run_cpu.sh installs them)")
    assert v0_5_23.DP_SPEC_PREFILL_ENV.name == DP_ENV == v0_5_23.REFUSED[1].setting
    ok, detail = v0_5_23.DP_SPEC_PREFILL_ENV.check_static(site)
    assert ok and "environ.py" in detail


# ---------------------------------------------------------------- the drop-in launcher

def _launch(args, **env):
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "sglang_patches.launch", "--model-path", "/nonexistent/model",
                        *args], capture_output=True, text=True, env=_env(**env), timeout=300)
    return r, time.monotonic() - t0


def _one_error_line(r):
    lines = [ln for ln in r.stderr.splitlines() if "error:" in ln]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    return lines[0]


@pytest.mark.parametrize("args,env,flag", [
    (["--pp-size", "2"], {}, "--pp-size 2"),
    (["--pipeline-parallel-size=3"], {}, "--pp-size 3"),
    ([], {DP_ENV: "1"}, f"{DP_ENV}=1"),
])
def test_launcher_refuses_before_starting(args, env, flag):
    r, elapsed = _launch(args, **env)
    if sglang_under_test() == "0.5.23":
        assert r.returncode == 2, r.stderr
        line = _one_error_line(r)
        assert line.startswith(f"sglang-patches: error: {flag} with the timing feature is refused on sglang 0.5.23")
        assert elapsed < 60, f"refusal took {elapsed:.0f} s: was something started?"
    else:  # 0.5.17: not refused; the launcher goes on to its GPU check (none here)
        assert r.returncode == 2 and "refused" not in r.stderr, r.stderr
        assert "no CUDA GPU is visible" in _one_error_line(r)


@ON_0523
def test_launcher_without_timing_is_not_refused():
    r, _ = _launch(["--pp-size", "2", "--patches", "all,-timing"], **{DP_ENV: "1"})
    assert "refused" not in r.stderr and "no CUDA GPU is visible" in _one_error_line(r)


# ---------------------------------------------------------------- the plugin (plain SGLang) and Engine

@ON_0523
def test_plugin_refuses_in_sglang_launch_server_before_it_parses_its_args():
    """`python -m sglang.launch_server` calls load_plugins() before anything else: the plugin's
    refusal stops it there (a nonexistent model path shows that SGLang never got to it)."""
    r = subprocess.run([sys.executable, "-m", "sglang.launch_server", "--model-path", "/nonexistent/model",
                        "--pp-size", "2"], capture_output=True, text=True, timeout=300,
                       env=_env(SGLANG_PATCHES_ENABLE="1"))
    assert r.returncode == 2, r.stderr[-2000:]
    line = _one_error_line(r)
    assert line.startswith("sglang-patches: error: --pp-size 2 with the timing feature is refused on sglang 0.5.23")
    assert "nonexistent" not in r.stderr


@ON_0523
def test_plugin_refuses_the_env_in_any_process(monkeypatch):
    from sglang_patches import plugin
    from sglang_patches.server.patches import catalog

    monkeypatch.setenv("SGLANG_PATCHES_ENABLE", "1")
    monkeypatch.delenv("SGLANG_PATCHES_CONFIG", raising=False)
    monkeypatch.setenv(DP_ENV, "true")
    with pytest.raises(SystemExit) as info:
        plugin.load()
    assert info.value.code == 2 and catalog._applied_in_process == []  # nothing patched


@ON_0523
@pytest.mark.parametrize("kwargs,env", [({"pp_size": 2}, {}), ({}, {DP_ENV: "1"}), ({"server_args": 3}, {})])
def test_engine_refuses_before_sglang_starts(monkeypatch, kwargs, env):
    from sglang.srt.server_args import ServerArgs

    from sglang_patches import engine as engine_mod

    if "server_args" in kwargs:  # a prebuilt ServerArgs (SGLang's real class) with this pp size
        kwargs = {"server_args": ServerArgs(model_path="/nonexistent/model", pp_size=kwargs["server_args"])}

    monkeypatch.delenv("SGLANG_PATCHES_CONFIG", raising=False)  # Engine sets it: put back afterwards
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    started = []
    monkeypatch.setattr(engine_mod._SGLangEngine, "__init__", lambda self, **kw: started.append(kw))
    with pytest.raises(UserError, match="with the timing feature is refused on sglang 0.5.23"):
        engine_mod.Engine(model_path="/nonexistent/model", **kwargs)
    assert started == []
    engine_mod.Engine(model_path="/nonexistent/model", overlay={"patches": ("marker", "checks")}, **kwargs)
    assert len(started) == 1  # without timing the same settings reach SGLang
