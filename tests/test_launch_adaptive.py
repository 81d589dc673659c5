"""The launcher's check of an adaptive server's start (sglang_patches/launch_adaptive.py) on what the
real SGLang parsed: its own prepare_server_args (on CPU, `--device cpu`) resolves the flags, its own
loader reads the candidates, and whether a start below the largest candidate fails is held to the real
ModelRunner source of each version."""
from __future__ import annotations

import ast
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import sglang_under_test
from sglang_patches import compat
from sglang_patches.errors import UserError
from sglang_patches.launch_adaptive import candidate_steps, check_parsed

# SGLang's ModelRunner.max_decode_logits_rows: 0.5.17 sizes the shared logits buffer from the start's
# draft tokens, 0.5.23 from every adaptive candidate too (read in their source)
FAILS_BELOW_LARGEST = {"0.5.17": True, "0.5.23": False}
only_0517 = pytest.mark.skipif(not FAILS_BELOW_LARGEST[sglang_under_test()], reason="this SGLang sizes its buffers "
                               "for every adaptive candidate: nothing to refuse (and its CPU parse is not needed)")


def _runner_rows_source() -> str:
    path = Path(compat.installed_site()) / "sglang" / "srt" / "model_executor" / "model_runner.py"
    text = path.read_text()
    fn = next(n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.FunctionDef) and n.name == "max_decode_logits_rows")
    return ast.get_source_segment(text, fn)


def test_compat_says_what_the_real_model_runner_does():
    counts_candidates = "resolve_candidate_steps_from_config" in _runner_rows_source()
    assert counts_candidates is not FAILS_BELOW_LARGEST[sglang_under_test()]
    assert compat.current().ADAPTIVE_BUFFERS_FROM_START is FAILS_BELOW_LARGEST[sglang_under_test()]


def test_candidates_come_from_sglangs_own_loader(tmp_path):
    defaults = compat.current().ADAPTIVE_DEFAULTS
    assert candidate_steps(None) == sorted({s for e in defaults.values() for s in e["candidate_steps"]})
    cfg = tmp_path / "a.json"
    cfg.write_text(json.dumps({"1": {"candidate_steps": [2, 4]}, "8": {"candidate_steps": [0, 3]}, "note": 1}))
    assert candidate_steps(str(cfg)) == [0, 2, 3, 4]


@pytest.fixture
def base(tmp_path):
    """SGLang flags of an EAGLE3 adaptive server on the tiny fixture, candidates [2, 4], parsed on CPU."""
    from sglang_patches.offline.fixtures import build_fixture

    fx = build_fixture("tiny", tmp_path / "tiny")
    cfg = tmp_path / "a.json"
    cfg.write_text(json.dumps({"1": {"candidate_steps": [2, 4]}}))
    return ["--model-path", str(fx.target), "--speculative-draft-model-path", str(fx.draft), "--device", "cpu",
            "--speculative-algorithm", "EAGLE3", "--speculative-adaptive", "--speculative-adaptive-config", str(cfg)]


def _parsed(argv):
    return compat.current().PREPARE_SERVER_ARGS.resolve()(argv)


@only_0517
def test_a_start_below_the_largest_candidate_is_refused_on_what_sglang_parsed(base):
    below = _parsed(base + ["--speculative-num-step", "2"])  # SGLang's parser takes the abbreviation
    assert below.speculative_num_steps == 2 and below.speculative_num_draft_tokens == 3
    with pytest.raises(UserError) as exc:
        check_parsed(below)
    msg = str(exc.value)
    assert msg.startswith("--speculative-adaptive: the server would start at steps 2 (3 draft tokens), below the "
                          "largest candidate of --speculative-adaptive-config ") and "(steps 4)" in msg
    assert msg.endswith("pass --speculative-num-steps 4 (SGLang sets draft tokens to steps + 1)") and "\n" not in msg
    # without a file and without the flag SGLang starts at its built-in table's middle candidate, 3 of [0, 1, 3, 7]
    with pytest.raises(UserError, match="start at steps 3 \\(4 draft tokens\\), below the largest candidate of "
                                        "SGLang's built-in adaptive table \\(steps 7\\)"):
        check_parsed(_parsed(base[:-2]))


@only_0517
@pytest.mark.parametrize("extra", [
    [],                                                                  # SGLang's pick: the middle of [2, 4] is 4
    ["--speculative-num-steps=4", "--speculative-num-draft-tokens", "3"],  # SGLang sets draft tokens to 5
    ["--speculative-num-steps", "2", "--disable-decode-cuda-graph"],      # no decode graphs, no buffer to size
    ["--speculative-num-steps", "2", "--attention-backend", "torch_native"],  # SGLang turns the decode graphs off
    ["--speculative-num-steps", "2", "--speculative-eagle-topk", "4"],    # SGLang turns adaptive off (topk 1 only)
])
def test_starts_sglang_can_run_pass(base, extra):
    check_parsed(_parsed(base + extra))


@only_0517
@pytest.mark.parametrize("extra, says", [
    (["--speculative-num-step", "2"], "sglang-patches: error: --speculative-adaptive: the server would start at steps 2"),
    (["--speculative-num-steps", "3"], "sglang-patches: error: SGLang refuses the arguments: --speculative-num-steps=3 "
                                       "is not in the adaptive config candidate_steps [2, 4]"),
])
def test_serve_refuses_in_one_line_before_the_server_starts(base, monkeypatch, capsys, extra, says):
    """launch.serve with SGLang's real argument parsing; its server start, plugin load and stop handler
    are stand-ins (the start needs a GPU)."""
    from sglang_patches import launch
    from sglang_patches.server import deliberate_stop

    real = compat.current()

    def started(*a, **k):
        raise AssertionError("the server was started")

    fake = SimpleNamespace(PREPARE_SERVER_ARGS=real.PREPARE_SERVER_ARGS, LOAD_ADAPTIVE_CONFIG=real.LOAD_ADAPTIVE_CONFIG,
                           ADAPTIVE_BUFFERS_FROM_START=real.ADAPTIVE_BUFFERS_FROM_START,
                           LOAD_PLUGINS=SimpleNamespace(resolve=lambda: lambda: None),
                           KILL_PROCESS_TREE=SimpleNamespace(resolve=lambda: lambda *a, **k: None),
                           HTTP_APP=SimpleNamespace(resolve=lambda: object()), LAUNCH_SERVER=SimpleNamespace(resolve=lambda: started))
    monkeypatch.setattr(launch, "check_gpu", lambda argv: None)
    monkeypatch.setattr(deliberate_stop, "install", lambda kill: None)
    monkeypatch.setattr(compat, "current", lambda: fake)
    with pytest.raises(SystemExit) as exc:
        launch.serve(base + extra)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith(says)


@only_0517
def test_advises_printed_flags_start_a_server_the_check_lets_through(base, tmp_path, capsys):
    """`advise --adaptive-config --json`'s server_flags, pasted beside the model flags, parse in SGLang
    and pass the start check: the file starts at its own largest candidate."""
    from test_adaptive_config import two_bucket_log

    from sglang_patches.offline import advise_cli

    log = two_bucket_log(tmp_path / "s5.jsonl")
    assert advise_cli.main([str(log), "--adaptive-config", str(tmp_path / "ours.json"), "--baseline-step-ms", "6.5",
                            "--cuda-graph-bs-decode", "1", "2", "4", "8", "--json"]) == 0
    flags = json.loads(capsys.readouterr().out)["server_flags"]
    model = base[:base.index("--speculative-adaptive")]  # the tiny pair, EAGLE3, on CPU
    parsed = _parsed(model + flags)
    assert parsed.speculative_adaptive and parsed.speculative_num_steps == max(candidate_steps(flags[2]))
    check_parsed(parsed)
