"""The features a flag brings with it, on every path that chooses features before the schedulers start:
- the drop-in launcher: `--print-patches` lists what main() then installs, for each flag that brings a
  feature (--draft-tp-size -> draft_tp, --draft-backend triton -> triton_draft, --speculative-adaptive
  -> adaptive_graphs), the latter given on the command line or in a `--config` YAML;
- the opt-in plugin in SGLang's server CLI: the launcher's rule on that process's own flags, handed to
  the schedulers it spawns through SGLANG_PATCHES_CONFIG;
- `sglang_patches.Engine`: the same rule on its keyword arguments or a prebuilt ServerArgs.
Run against the real SGLang under test (0.5.17, where adaptive_graphs installs a hook, and 0.5.23,
where it installs nothing)."""
from __future__ import annotations

import json
import os
import re
import sys

import pytest
from conftest import sglang_under_test

from sglang_patches import launch, plugin
from sglang_patches.server.hooks import REGISTRY
from sglang_patches.server.patches import catalog
from sglang_patches.vocab.overlay_config import ENV_VAR, FEATURES, OverlayConfig

DEFAULT = list(FEATURES)


def _yaml(tmp_path, text, name="serve.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _drafter(tmp_path):
    """A drafter directory --draft-backend triton accepts (its config.json is all the launcher reads)."""
    d = tmp_path / "drafter"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLMEagle3"],
                                               "torch_dtype": "bfloat16", "hidden_size": 64}))
    return str(d)


def _printed_features(capsys, argv) -> list[str]:
    assert launch.main(["--print-patches", *argv]) == 0
    out = capsys.readouterr().out
    found = re.findall(r"^\d+ hooks in features: (.*)$", out, re.M)
    assert len(found) == 1, out
    return [] if found[0] == "none" else found[0].split(", ")


def _installed_features(monkeypatch, argv) -> list[str]:
    """What main() hands the server. serve() is replaced: SGLang's HTTP server and schedulers need a GPU."""
    seen = {}

    def fake_serve(sglang_argv, exit_on_collapse=False, features=(), said=()):
        seen["features"] = list(features)
        seen["env"] = list(OverlayConfig.from_json(os.environ[ENV_VAR]).patches)  # what the schedulers read
        return 0

    monkeypatch.setattr(launch, "serve", fake_serve)
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert launch.main(argv) == 0
    assert seen["features"] == seen["env"]
    return seen["features"]


@pytest.mark.parametrize("flags,yaml_text,features", [
    (["--draft-tp-size", "1"], None, DEFAULT + ["draft_tp"]),
    (["--draft-backend", "triton"], None, DEFAULT + ["triton_draft"]),
    (["--speculative-adaptive"], None, DEFAULT + ["adaptive_graphs"]),
    ([], "speculative-adaptive: true\n", DEFAULT + ["adaptive_graphs"]),  # the flag in a --config file
    ([], "speculative-adaptive: false\n", DEFAULT),                       # a YAML false: the flag is absent
    (["--patches", "all,-adaptive_graphs"], "speculative-adaptive: true\n", DEFAULT),
    (["--patches", "marker,timing", "--speculative-adaptive"], None, ["marker", "timing"]),  # as written
    (["--draft-tp-size", "1", "--draft-backend", "triton", "--speculative-adaptive"], None,
     DEFAULT + ["triton_draft", "adaptive_graphs", "draft_tp"]),
    (["--patches", "none", "--draft-tp-size", "1", "--speculative-adaptive"], None, ["draft_tp"]),
])
def test_print_patches_lists_what_the_launcher_installs(tmp_path, monkeypatch, capsys, flags, yaml_text, features):
    argv = ["--model-path", "org/target", "--speculative-algorithm", "EAGLE3", "--tp-size", "2",
            "--speculative-num-steps", "7",  # an adaptive start at the built-in table's largest candidate
            "--speculative-draft-model-path", _drafter(tmp_path), "--skip-preflight", *flags]
    if yaml_text is not None:
        argv += ["--config", _yaml(tmp_path, yaml_text)]
    printed = _printed_features(capsys, argv)
    installed = _installed_features(monkeypatch, argv)
    assert printed == installed == features


def test_print_patches_names_the_hooks_of_each_feature_a_flag_brings(capsys):
    """Every hook of draft_tp and adaptive_graphs (the real targets of the SGLang under test) is listed."""
    assert launch.main(["--print-patches", "--draft-tp-size", "1", "--speculative-adaptive"]) == 0
    out = capsys.readouterr().out
    specs = catalog.specs_for(["draft_tp", "adaptive_graphs"])
    assert {s.feature for s in specs} >= {"draft_tp"}
    for spec in specs:
        assert spec.target in out, spec.target
    assert REGISTRY.applied == []  # listing patches nothing


# ---------------------------------------------------------------- the plugin in SGLang's server CLI

@pytest.fixture
def clean(monkeypatch):
    catalog.undo_overlay()
    monkeypatch.setenv(plugin.ENABLE_ENV, "1")
    monkeypatch.delenv(ENV_VAR, raising=False)
    yield
    catalog.undo_overlay()


def _graph_hooks() -> int:
    return sum(h.spec.feature == "adaptive_graphs" for h in REGISTRY.applied)


def _hooks_of_the_feature() -> int:
    """How many hooks adaptive_graphs installs here: 1 on 0.5.17, none on 0.5.23 (SGLang sizes the graphs)."""
    return {"0.5.17": 1, "0.5.23": 0}[sglang_under_test()]  # the version's own, not compat's word for it


@pytest.mark.parametrize("env,flags,yaml_text,added", [
    (None, ["--speculative-adaptive"], None, True),
    (None, [], "speculative-adaptive: true\n", True),                  # in a --config file
    ({"timing_log": "/tmp/c.jsonl"}, ["--speculative-adaptive"], None, True),  # no "patches": all
    ({"patches": ["all"]}, ["--speculative-adaptive"], None, True),
    ({"patches": ["all", "-adaptive_graphs"]}, ["--speculative-adaptive"], None, False),
    ({"patches": ["marker", "timing", "checks"]}, ["--speculative-adaptive"], None, False),  # as written
    (None, [], None, False),
])
def test_plugin_in_the_server_cli_applies_the_launchers_rule(clean, monkeypatch, tmp_path, env, flags, yaml_text,
                                                             added):
    if env is not None:
        monkeypatch.setenv(ENV_VAR, json.dumps(env))
    argv = ["/venv/bin/sglang", "serve", "--model-path", "/nonexistent/model", *flags]
    if yaml_text is not None:
        argv += ["--config", _yaml(tmp_path, yaml_text)]
    monkeypatch.setattr(sys, "argv", argv)
    before = os.environ.get(ENV_VAR)
    plugin.load()
    assert _graph_hooks() == (_hooks_of_the_feature() if added else 0)
    if added:  # the schedulers this process spawns inherit the environment, and read the feature there
        assert "adaptive_graphs" in OverlayConfig.from_env().patches
    else:
        assert os.environ.get(ENV_VAR) == before
    after = os.environ.get(ENV_VAR)
    plugin.load()  # SGLang loads plugins again in _launch_subprocesses: nothing changes
    assert os.environ.get(ENV_VAR) == after


def test_plugin_outside_the_server_cli_leaves_the_features_as_configured(clean, monkeypatch):
    """An Engine user's script: its argv is not SGLang's flags, and the Engine's arguments do not exist yet."""
    monkeypatch.setattr(sys, "argv", ["/home/u/bench.py", "--speculative-adaptive"])
    plugin.load()
    assert _graph_hooks() == 0 and os.environ.get(ENV_VAR) is None


# ---------------------------------------------------------------- sglang_patches.Engine

def _server_args(tmp_path, adaptive: bool):
    """SGLang's real ServerArgs for a small EAGLE-3 pair (0.5.17 reads the configs while building it;
    without an EAGLE algorithm SGLang turns speculative_adaptive off itself)."""
    from sglang.srt.server_args import ServerArgs

    from sglang_patches.offline.fixtures.specs import eagle3_drafter, llama_target

    target = llama_target(hidden=96, layers=2, heads=4, kv_heads=2, intermediate=160, vocab=256, max_pos=512)
    for name, cfg in (("target", target), ("draft", eagle3_drafter(target))):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(json.dumps(cfg))
    sa = ServerArgs(model_path=str(tmp_path / "target"), speculative_draft_model_path=str(tmp_path / "draft"),
                    speculative_algorithm="EAGLE3", speculative_num_steps=3, speculative_eagle_topk=1,
                    speculative_num_draft_tokens=4, speculative_adaptive=adaptive, device="cpu")
    assert sa.speculative_adaptive is adaptive  # as SGLang kept it
    return sa


@pytest.mark.parametrize("overlay,kwargs,added", [
    (None, {"speculative_adaptive": True}, True),
    ({"timing_log": "/tmp/c.jsonl"}, {"speculative_adaptive": True}, True),  # no "patches": all
    ({"patches": ["marker", "timing", "checks"]}, {"speculative_adaptive": True}, False),  # as written
    (OverlayConfig(), {"speculative_adaptive": True}, False),  # an OverlayConfig object: as built
    (None, {"speculative_adaptive": False}, False),
    (None, {}, False),
    (None, "server_args:adaptive", True),
    (None, "server_args:plain", False),
])
def test_engine_applies_the_launchers_rule(monkeypatch, tmp_path, overlay, kwargs, added):
    from sglang_patches import engine as engine_mod

    if isinstance(kwargs, str):  # a prebuilt ServerArgs: SGLang's Engine reads only it
        kwargs = {"server_args": _server_args(tmp_path, adaptive=kwargs.endswith(":adaptive"))}
    else:
        kwargs = {"model_path": "/m", **kwargs}
    monkeypatch.delenv(ENV_VAR, raising=False)  # Engine sets it: put back afterwards
    started = []
    # SGLang's Engine start (tokenizer, schedulers, detokenizer) needs a GPU: replaced by a recorder
    monkeypatch.setattr(engine_mod._SGLangEngine, "__init__", lambda self, **kw: started.append(kw))
    engine_mod.Engine(overlay=overlay, **kwargs)
    assert started == [kwargs]  # SGLang gets its own arguments, unchanged
    assert ("adaptive_graphs" in OverlayConfig.from_env().patches) is added
