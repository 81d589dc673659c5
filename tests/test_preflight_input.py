"""Preflight takes what users type: a pasted serve command (SGLang flags it does not need ignored and
named once), hub ids found in the local Hugging Face cache (a cache laid out as huggingface_hub
writes it: refs/<rev> -> snapshots/<commit>/, files linked into blobs/), the serve command's
load-format and quantization flags (SP010, SP011), and the preflight line the no-acceptance verdict
prints, run exactly as printed."""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from sglang_patches.errors import UserError
from sglang_patches.offline.preflight import run_preflight
from sglang_patches.offline.preflight.hub_cache import NotCached, hub_cache_dir, resolve_model
from sglang_patches.vocab import no_accept

from preflight_models import LLAMA_8B, REPO, codes, llama, make_dir, only  # noqa: F401 (llama: a fixture)


def run_cli(*args: str, **env) -> subprocess.CompletedProcess:
    e = dict(os.environ, PYTHONPATH=str(REPO))
    for k in ("HF_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        e.pop(k, None)
    e.update(env)
    return subprocess.run([sys.executable, "-m", "sglang_patches", "preflight", *args],
                          cwd=REPO, env=e, capture_output=True, text=True, timeout=120)


def cache_model(cache: Path, repo_id: str, src: Path, commit: str = "0123abcd", ref: str | None = "main") -> Path:
    """Put checkpoint `src` into a hub cache as huggingface_hub does (files are links into blobs/)."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    snap = repo / "snapshots" / commit
    snap.mkdir(parents=True)
    (repo / "blobs").mkdir(exist_ok=True)
    for f in src.iterdir():
        blob = repo / "blobs" / f"{commit}-{f.name}"
        blob.write_bytes(f.read_bytes())
        (snap / f.name).symlink_to(os.path.relpath(blob, snap))
    if ref:
        (repo / "refs").mkdir(exist_ok=True)
        (repo / "refs" / ref).write_text(commit)
    return snap


@pytest.fixture
def cached_pair(tmp_path, llama):
    cache = tmp_path / "hf" / "hub"
    t = cache_model(cache, "meta-llama/Llama-3.1-8B-Instruct", llama[0])
    d = cache_model(cache, "acme/EAGLE3-Llama-3.1-8B", llama[1])
    return cache, t, d


SERVE = ["python3", "-m", "sglang.launch_server", "--model-path", "meta-llama/Llama-3.1-8B-Instruct",
         "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "acme/EAGLE3-Llama-3.1-8B",
         "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4",
         "--tp-size", "8", "--port", "30000", "--mem-fraction-static", "0.88", "--trust-remote-code",
         "--cuda-graph-max-bs=16", "--host", "0.0.0.0"]


def test_the_whole_serve_command_with_hub_ids(cached_pair, tmp_path):
    cache, t, d = cached_pair
    r = run_cli(*SERVE, HF_HOME=str(tmp_path / "hf"))  # HF_HOME/hub
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines() == ["sglang-patches: note: ignored SGLang (or unknown) flags preflight does not need: "
                                     "--tp-size, --port, --mem-fraction-static, --trust-remote-code, "
                                     "--cuda-graph-max-bs, --host"]
    out = r.stdout.splitlines()
    assert out[0] == out[-1] == "compatible: 0 error(s), 0 warning(s)"  # the verdict first, and last again
    notes = [ln for ln in out if ln.startswith("note: ")]
    assert notes[0] == f"note: target meta-llama/Llama-3.1-8B-Instruct (revision main): {t} in the local Hugging Face cache"
    assert notes[1].startswith("note: drafter acme/EAGLE3-Llama-3.1-8B (revision main): ")
    # the same mix-up preflight exists for is found through the cache: EAGLE with an EAGLE-3 head
    bad = run_cli(*[("EAGLE" if a == "EAGLE3" else a) for a in SERVE], HF_HUB_CACHE=str(cache), HF_HOME="/nonexistent")
    assert bad.returncode == 1 and "ERROR   SP001" in bad.stdout


def test_hub_ids_not_in_the_cache_are_one_clear_line(cached_pair, tmp_path, monkeypatch):
    cache, t, d = cached_pair
    r = run_cli("--model-path", "meta-llama/Llama-3.1-70B", "--speculative-draft-model-path", str(d),
                HF_HUB_CACHE=str(cache))
    assert r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.splitlines()) == 1
    assert (f"target model 'meta-llama/Llama-3.1-70B' is not a local directory and not in the Hugging Face cache "
            f"{cache} (HF_HUB_CACHE / HF_HOME); download what preflight reads (`hf download meta-llama/Llama-3.1-70B "
            "config.json`: its config.json only)") in r.stderr
    # the drafter: its config and weight headers (a head of a few GB), at the revision the server loads
    r = run_cli("--model-path", str(t), "--speculative-draft-model-path", "acme/EAGLE3-Kimi-K2",
                "--speculative-draft-model-revision", "v2", HF_HUB_CACHE=str(cache))
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1
    # safetensors only: a repo shipping both formats is not downloaded twice; '*.bin' is said for one that has none
    assert ("(`hf download acme/EAGLE3-Kimi-K2 '*.json' '*.safetensors' --revision v2`: the head's config "
            "and weights; add '*.bin' if it ships no safetensors)") in r.stderr
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    with pytest.raises(NotCached, match="revision 'v2' is not in"):
        resolve_model("acme/EAGLE3-Llama-3.1-8B", "drafter", "v2")


def test_cache_order_revisions_and_partial_downloads(tmp_path, llama, monkeypatch):
    for k in ("HF_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert hub_cache_dir() == tmp_path / "home" / ".cache" / "huggingface" / "hub"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert hub_cache_dir() == tmp_path / "xdg" / "huggingface" / "hub"
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hfh"))
    assert hub_cache_dir() == tmp_path / "hfh" / "hub"
    cache = tmp_path / "c"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    assert hub_cache_dir() == cache
    main = cache_model(cache, "org/m", llama[0], commit="aaaa")
    other = cache_model(cache, "org/m", llama[1], commit="bbbb", ref="v2")
    assert resolve_model("org/m", "target")[0] == str(main)
    assert resolve_model("org/m", "target", "v2")[0] == str(other)
    assert resolve_model("org/m", "target", "bbbb")[0] == str(other)  # a commit hash names its snapshot
    only_commit = cache_model(cache, "org/by-commit", llama[0], commit="cccc", ref=None)
    assert resolve_model("org/by-commit", "target")[0] == str(only_commit)
    (only_commit / "config.json").unlink()
    with pytest.raises(NotCached, match="has no config.json .a partial download"):
        resolve_model("org/by-commit", "target")
    # an existing local path always wins, and a non-id is left for the reader to name
    assert resolve_model(str(llama[0]), "target") == (str(llama[0]), None)
    with pytest.raises(UserError, match="does not exist"):
        run_preflight(str(tmp_path / "no" / "such"), llama[1], "EAGLE3")


def test_dummy_weights_and_quantised_targets_are_named(tmp_path, llama):
    t, d = llama
    own = only(run_preflight(t, d, "EAGLE3", load_format="dummy"), "SP010")
    assert own.severity == "warning" and own.fix.startswith("load the drafter's real weights: drop --load-format dummy")
    assert "--speculative-draft-load-format dummy" in only(
        run_preflight(t, d, "EAGLE3", load_format="auto", draft_load_format="dummy"), "SP010").message
    assert "SP010" not in codes(run_preflight(t, d, "EAGLE3", load_format="dummy", draft_load_format="auto"))
    assert "inherits --quantization fp8" in only(run_preflight(t, d, "EAGLE3", quantization="fp8"), "SP011").message
    assert "SP011" not in codes(run_preflight(t, d, "EAGLE3", quantization="fp8", draft_quantization="fp8"))
    assert "SP011" in codes(run_preflight(t, d, "EAGLE3", quantization="fp8", draft_quantization="unquant"))
    fp8 = make_dir(tmp_path, "fp8", {**LLAMA_8B, "quantization_config": {"quant_method": "fp8"}})
    f = only(run_preflight(fp8, d, "EAGLE3"), "SP011")
    assert "target is quantised (fp8, its config.json quantization_config) and the drafter is not" in f.message
    assert "SP011" not in codes(run_preflight(fp8, d, "EAGLE3", quantization="unquant"))
    assert codes(run_preflight(t, d, "EAGLE3")) == []  # neither fires on a plain bf16 pair


@pytest.mark.parametrize("algorithm", [None, "EAGLE3", "EAGLE"])
def test_the_verdicts_preflight_line_runs_as_printed(llama, algorithm):
    t, d = llama
    cmd = no_accept.preflight_command(t, d, algorithm, 3, 1, 4)
    argv = shlex.split(cmd)
    assert argv[:2] == ["sglang-patches", "preflight"]
    r = subprocess.run([str(Path(sys.executable).parent / "sglang-patches"), *argv[1:]], capture_output=True,
                       text=True, env=dict(os.environ, PYTHONPATH=str(REPO)), cwd=REPO, timeout=120)
    assert "Traceback" not in r.stderr and r.stderr == ""
    if algorithm == "EAGLE":  # the mix-up it is there to find
        assert r.returncode == 1 and "SP001" in r.stdout
    else:
        assert r.returncode == 0 and r.stdout.splitlines()[-1] == "compatible: 0 error(s), 0 warning(s)"


def test_the_old_alarm_form_target_draft_runs(llama):
    t, d = llama
    r = run_cli("--target", str(t), "--draft", str(d), "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["algorithm"] == "EAGLE3" and data["notes"] == [
        "no --speculative-algorithm given: checked as EAGLE3, the one this drafter needs; pass the server's own to "
        "check what it runs"]


def test_the_verdict_text_names_the_causes_and_the_command():
    assert no_accept.verdict(1.5, 3) is None and no_accept.verdict(1.05, 1) is None
    v = no_accept.verdict(1.04, 5, no_accept.preflight_command("/m/t", "/m/d", "EAGLE"))
    assert v["check"] == ("sglang-patches preflight --model-path /m/t --speculative-draft-model-path /m/d "
                          "--speculative-algorithm EAGLE")
    lines = no_accept.verdict_lines(v)
    assert lines[0].startswith("the drafter accepts nothing: accept length 1.04 at steps 5 (up to 6 possible)")
    assert lines[2] == "check them: " + v["check"]  # real paths: no placeholder note
    u = no_accept.verdict(1.04, 5)
    assert "--model-path TARGET --speculative-draft-model-path DRAFT" in u["check"]
    assert no_accept.verdict_lines(u)[2].endswith("(TARGET and DRAFT stand for the --model-path and "
        "--speculative-draft-model-path the server was started with, not known here; or paste the whole "
        "serve command after `sglang-patches preflight`)")
    assert no_accept.preflight_command("/a b", None) == ("sglang-patches preflight --model-path '/a b' "
                                                         "--speculative-draft-model-path DRAFT")
