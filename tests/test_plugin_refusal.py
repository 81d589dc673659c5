"""The opt-in plugin refuses, on 0.5.23, the settings the launcher refuses (--pp-size > 1 with
timing) where it first sees them: SGLang's flags and a --config file in the server CLI's own argv
(before anything is patched), and SGLang's ServerArgs in Engine._launch_subprocesses for what only
they show (`sglang.Engine(pp_size=2)`, `Engine(server_args=...)`), before any process starts,
undoing nothing (the overlay stays applied under what else runs in the process). On 0.5.17 (no such
path) no refusal hook is installed; a multiprocessing child (scheduler, detokenizer) installs none
unless it imported SGLang's engine module itself (resolving the hook would import it, and uvloop's
event-loop policy with it)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import needs_sglang, sglang_under_test

from sglang_patches import plugin
from sglang_patches.server.hooks import REGISTRY
from sglang_patches.server.patches import catalog
from sglang_patches.vocab.overlay_config import ENV_VAR, OverlayConfig

DP_ENV = "SGLANG_ENABLE_DP_SPEC_PREFILL_COORDINATION"
ON_0523 = needs_sglang("0.5.23", why="the refused settings are 0.5.23's (pp tail-draft); 0.5.17 has no such path")


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_PATCHES_") and k != DP_ENV}
    env.update(extra)
    return env


@pytest.fixture
def clean(monkeypatch):
    catalog.undo_overlay()
    monkeypatch.setenv(plugin.ENABLE_ENV, "1")
    monkeypatch.delenv(DP_ENV, raising=False)
    yield
    catalog.undo_overlay()


def _launch_hooks():
    return [h for h in REGISTRY.applied if h.spec.target.endswith(":Engine._launch_subprocesses")]


def test_refusal_hook_installed_only_where_a_refusal_can_apply(clean, monkeypatch):
    monkeypatch.setenv(ENV_VAR, OverlayConfig().to_env())  # timing on
    plugin.load()
    assert len(_launch_hooks()) == (1 if sglang_under_test() == "0.5.23" else 0)
    plugin.load()  # once per process
    assert len(_launch_hooks()) == (1 if sglang_under_test() == "0.5.23" else 0)
    catalog.undo_overlay()
    monkeypatch.setenv(ENV_VAR, OverlayConfig(patches=("marker", "checks")).to_env())  # no timing
    plugin.load()
    assert _launch_hooks() == [] and catalog._applied_in_process


ENGINE_SCRIPT = r"""
import json, multiprocessing, os
import sglang
from sglang.srt.entrypoints.engine import Engine
from sglang.srt.server_args import ServerArgs, prepare_server_args
from sglang_patches.errors import UserError
from sglang_patches.server.patches import catalog

launched = []
class Launched(Exception):
    pass
def stub(cls, server_args, *args, **kwargs):
    # mock of SGLang's _launch_subprocesses, which starts the tokenizer, scheduler and detokenizer
    # (no GPU here); the plugin's hook wraps it as it wraps the real one
    launched.append(server_args.pp_size)
    raise Launched
Engine._launch_subprocesses = classmethod(stub)
out = []
for how in ("kwargs", "server_args", "parsed", "pp1"):
    try:
        if how == "kwargs":
            sglang.Engine(model_path="/nonexistent/model", pp_size=2)
        elif how == "server_args":
            sglang.Engine(server_args=ServerArgs(model_path="/nonexistent/model", pp_size=3))
        elif how == "parsed":  # SGLang's parser took the abbreviation --pp-s for --pp-size
            sglang.Engine(server_args=prepare_server_args(["--model-path", "/nonexistent/model", "--pp-s", "4"]))
        else:
            sglang.Engine(model_path="/nonexistent/model", pp_size=1)
        got = "started"
    except UserError as err:
        got = "UserError: " + str(err)
    except Launched:
        got = "launched"
    out.append({"how": how, "got": got, "launched": list(launched), "patched": len(catalog._applied_in_process),
                "children": len(multiprocessing.active_children())})
print("RESULT " + json.dumps(out))
"""


@ON_0523
def test_engine_with_the_plugin_refuses_pp_before_any_process_starts():
    r = subprocess.run([sys.executable, "-c", ENGINE_SCRIPT], capture_output=True, text=True, timeout=300,
                       env=_env(SGLANG_PATCHES_ENABLE="1"))
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    assert r.returncode == 0 and lines, r.stderr[-3000:]
    kwargs, prebuilt, parsed, pp1 = json.loads(lines[0][len("RESULT "):])
    applied = kwargs["patched"]
    for case, pp in ((kwargs, 2), (prebuilt, 3), (parsed, 4)):
        assert case["got"].startswith(f"UserError: --pp-size {pp} with the timing feature is refused on sglang 0.5.23")
        assert "--patches all,-timing" in case["got"] and "\n" not in case["got"]
        assert case["launched"] == [] and case["children"] == 0, case  # refused before any process started
        assert case["patched"] == applied > 0, case  # nothing undone under the process's other users
    # the same process, pp 1: past the refusal to SGLang's launch, the same overlay applied
    assert pp1["got"] == "launched" and pp1["launched"] == [1] and pp1["patched"] == applied, pp1


def _yaml(tmp_path, text):
    path = tmp_path / "serve.yaml"
    path.write_text(text)
    return str(path)


@ON_0523
def test_plugin_refuses_pp_from_a_config_file_in_sglang_launch_server(tmp_path):
    """`python -m sglang.launch_server --config FILE` with pp-size in the file: refused in load_plugins(),
    before SGLang parses its flags (a nonexistent model path shows it never got to it)."""
    r = subprocess.run([sys.executable, "-m", "sglang.launch_server", "--model-path", "/nonexistent/model",
                        "--config", _yaml(tmp_path, "pp-size: 2\n")], capture_output=True, text=True, timeout=300,
                       env=_env(SGLANG_PATCHES_ENABLE="1"))
    errors = [ln for ln in r.stderr.splitlines() if "error:" in ln]
    assert r.returncode == 2 and len(errors) == 1 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert errors[0].startswith("sglang-patches: error: --pp-size 2 with the timing feature is refused on sglang 0.5.23")
    assert "nonexistent" not in r.stderr


def test_plugin_refuses_an_unreadable_config_file_in_the_server_cli(clean, monkeypatch, tmp_path, capsys):
    missing = str(tmp_path / "missing.yaml")
    monkeypatch.setenv(ENV_VAR, OverlayConfig().to_env())
    monkeypatch.setattr(sys, "argv", ["/venv/bin/sglang", "serve", "--model-path", "m", "--config", missing])
    with pytest.raises(SystemExit) as info:
        plugin.load()
    assert info.value.code == 2 and catalog._applied_in_process == [] and REGISTRY.applied == []
    assert capsys.readouterr().err.strip() == (f"sglang-patches: error: --config {missing}: cannot read it "
                                               "(No such file or directory); give a readable YAML file")


CHILD_SCRIPT = r"""
import asyncio, json, multiprocessing, sys

def child(queue, import_engine):
    if import_engine:
        import sglang.srt.entrypoints.engine  # noqa: F401  (a child that uses SGLang's Engine itself)
    import asyncio
    from sglang_patches import plugin
    from sglang_patches.server.hooks import REGISTRY

    before = "sglang.srt.entrypoints.engine" in sys.modules
    plugin.load()
    queue.put({"engine_before": before, "engine_after": "sglang.srt.entrypoints.engine" in sys.modules,
               "policy": type(asyncio.get_event_loop_policy()).__module__,
               "hooks": sum(h.spec.target.endswith(":Engine._launch_subprocesses") for h in REGISTRY.applied)})

if __name__ == "__main__":
    ctx = multiprocessing.get_context("spawn")  # as SGLang starts its schedulers and detokenizer
    out = []
    for import_engine in (False, True):
        queue = ctx.Queue()
        p = ctx.Process(target=child, args=(queue, import_engine))
        p.start()
        out.append(queue.get(timeout=240))
        p.join()
    print("RESULT " + json.dumps(out))
"""


def test_a_child_process_installs_no_launch_hook_unless_it_imported_the_engine(tmp_path):
    script = tmp_path / "children.py"
    script.write_text(CHILD_SCRIPT)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                       env=_env(SGLANG_PATCHES_ENABLE="1", **{ENV_VAR: OverlayConfig().to_env()}))
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    assert r.returncode == 0 and lines, r.stderr[-3000:]
    plain, with_engine = json.loads(lines[0][len("RESULT "):])
    # a scheduler-like child: SGLang's engine module (and its uvloop policy) stays out of it
    assert plain == {"engine_before": False, "engine_after": False, "policy": "asyncio.unix_events", "hooks": 0}, plain
    # a child that imported the engine itself gets the refusal where this SGLang has one
    assert with_engine["engine_before"] and with_engine["policy"].startswith("uvloop"), with_engine
    assert with_engine["hooks"] == (1 if sglang_under_test() == "0.5.23" else 0), with_engine
