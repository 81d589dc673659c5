"""The launcher's checks of SGLang's --speculative-adaptive (sglang_patches/launch_adaptive.py), on the
real SGLang of each supported version: its own config loader reads the candidates, its own
prepare_server_args gives the parsed check its ServerArgs, and whether a start below the largest
candidate fails is held to the real ModelRunner source."""
from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from conftest import sglang_under_test
from sglang_patches import compat
from sglang_patches.errors import UserError
from sglang_patches.launch_adaptive import candidate_steps, check_adaptive, check_parsed

# SGLang's ModelRunner.max_decode_logits_rows: 0.5.17 sizes the shared logits buffer from the start's
# draft tokens, 0.5.23 from every adaptive candidate too (read in their source)
FAILS_BELOW_LARGEST = {"0.5.17": True, "0.5.23": False}
EAGLE3 = ["--speculative-adaptive", "--speculative-algorithm", "EAGLE3", "--speculative-eagle-topk", "1"]


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


@pytest.mark.parametrize("text, says", [
    (json.dumps({"1": {"candidate_steps": "4"}}), "SGLang's loader refuses it: BS 1: candidate_steps must be"),
    ("{not json", "SGLang's loader refuses it:"),
])
def test_a_file_sglang_would_refuse_is_refused_in_one_line(tmp_path, text, says):
    cfg = tmp_path / "bad.json"
    cfg.write_text(text)
    with pytest.raises(UserError, match=says) as exc:
        check_adaptive(EAGLE3 + ["--speculative-adaptive-config", str(cfg)], [])
    assert "\n" not in str(exc.value)
    with pytest.raises(UserError, match="cannot be read"):
        check_adaptive(EAGLE3 + ["--speculative-adaptive-config", str(tmp_path / "missing.json")], [])


@pytest.fixture
def cfg24(tmp_path):
    cfg = tmp_path / "a.json"
    cfg.write_text(json.dumps({"1": {"candidate_steps": [2, 4]}}))
    return EAGLE3 + ["--speculative-adaptive-config", str(cfg)]


def test_a_start_below_the_largest_candidate(cfg24):
    below = cfg24 + ["--speculative-num-steps", "2"]
    if FAILS_BELOW_LARGEST[sglang_under_test()]:
        with pytest.raises(UserError) as exc:
            check_adaptive(below, [])
        msg = str(exc.value)
        assert "start at --speculative-num-steps 2 (3 draft tokens), below the largest candidate" in msg
        assert "(steps 4)" in msg and msg.endswith("pass --speculative-num-steps 4 (SGLang sets draft tokens to steps + 1)")
        # SGLang picks the middle of its built-in table's [0, 1, 3, 7] without the flag: steps 3, below 7
        with pytest.raises(UserError, match="start at steps 3 \\(SGLang's pick without --speculative-num-steps"):
            check_adaptive(EAGLE3, [])
    else:
        check_adaptive(below, [])
        check_adaptive(EAGLE3, [])
    warnings: list = []
    check_adaptive(cfg24 + ["--speculative-num-steps=4", "--speculative-num-draft-tokens", "3"], warnings)  # SGLang sets 5
    check_adaptive(cfg24, warnings)  # SGLang's pick, the middle of [2, 4], is 4
    for off in (["--disable-cuda-graph"], ["--disable-decode-cuda-graph"], ["--cuda-graph-backend-decode", "disabled"]):
        check_adaptive(below + off, warnings)  # no decode graphs, no buffer to size (the parsed check reads them)
    check_adaptive(["--speculative-num-steps", "1"], warnings)  # not adaptive
    assert warnings == []


def test_a_start_that_is_not_a_candidate_is_refused_on_every_version(cfg24):
    with pytest.raises(UserError) as exc:
        check_adaptive(cfg24 + ["--speculative-num-steps", "3", "--disable-cuda-graph"], [])
    assert str(exc.value).startswith("--speculative-adaptive: --speculative-num-steps 3 is not one of the candidates "
                                     "[2, 4] of --speculative-adaptive-config")


@pytest.mark.parametrize("flags, says", [
    (["--speculative-eagle-topk", "4"], "--speculative-eagle-topk 4: SGLang adapts at topk 1 only"),
    (["--speculative-algorithm", "NGRAM"], "--speculative-algorithm NGRAM: SGLang adapts EAGLE / EAGLE3 only"),
])
def test_settings_under_which_sglang_turns_adaptive_off_are_warned(flags, says):
    warnings: list = []
    check_adaptive(EAGLE3 + ["--speculative-num-steps", "1"] + flags, warnings)  # below 7: no refusal either
    assert len(warnings) == 1 and says in warnings[0] and "turns adaptive off" in warnings[0]
    warnings.clear()
    check_adaptive(["--speculative-adaptive", "--speculative-num-steps", "1"], warnings)
    assert len(warnings) == 1 and "without --speculative-algorithm" in warnings[0]
    check_adaptive(EAGLE3[:-1] + ["01", "--speculative-num-steps", "7"], warnings)  # topk 01 is 1
    assert len(warnings) == 1


@pytest.mark.skipif(not FAILS_BELOW_LARGEST[sglang_under_test()], reason="this SGLang sizes its buffers for every "
                    "candidate: the parsed check has nothing to refuse")
def test_the_parsed_check_reads_what_sglangs_parser_made_of_the_flags(tmp_path, cfg24):
    from sglang_patches.offline.fixtures import build_fixture

    fx = build_fixture("tiny", tmp_path / "tiny")
    prepare = compat.current().PREPARE_SERVER_ARGS.resolve()
    base = ["--model-path", str(fx.target), "--speculative-draft-model-path", str(fx.draft), "--device", "cpu"] + cfg24
    abbreviated = prepare(base + ["--speculative-num-step", "2"])  # SGLang's parser takes the abbreviation
    assert abbreviated.speculative_num_steps == 2 and abbreviated.speculative_num_draft_tokens == 3
    check_adaptive(base + ["--speculative-num-step", "2"], [])  # the flags check reads no abbreviation
    with pytest.raises(UserError, match="start at --speculative-num-steps 2 \\(3 draft tokens\\)"):
        check_parsed(abbreviated)
    check_parsed(prepare(base + ["--speculative-num-steps", "4"]))
    check_parsed(prepare(base + ["--speculative-num-steps", "2", "--disable-decode-cuda-graph"]))


def test_the_launcher_refuses_before_anything_starts(capsys):
    from sglang_patches import launch

    if not FAILS_BELOW_LARGEST[sglang_under_test()]:
        pytest.skip("this SGLang sizes its buffers for every candidate: nothing to refuse")
    try:
        code = launch.main(EAGLE3 + ["--speculative-num-steps", "3"])
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert err.startswith("sglang-patches: error: --speculative-adaptive: the server would start at "
                          "--speculative-num-steps 3 (4 draft tokens)")
