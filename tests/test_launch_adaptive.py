"""The launcher's checks of SGLang's --speculative-adaptive (sglang_patches/launch_adaptive.py), on the
real SGLang of each supported version: its own config loader reads the candidates, and whether a start
below the largest candidate fails is held to the real ModelRunner source."""
from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from conftest import sglang_under_test
from sglang_patches import compat
from sglang_patches.errors import UserError
from sglang_patches.launch_adaptive import candidate_steps, check_adaptive

# SGLang's ModelRunner.max_decode_logits_rows: 0.5.17 sizes the shared logits buffer from the start's
# draft tokens, 0.5.23 from every adaptive candidate too (read in their source)
FAILS_BELOW_LARGEST = {"0.5.17": True, "0.5.23": False}
EAGLE3 = ["--speculative-adaptive", "--speculative-algorithm", "EAGLE3", "--speculative-eagle-topk", "1"]


def _runner_rows_source() -> str:
    path = Path(compat.installed_site()) / "sglang" / "srt" / "model_executor" / "model_runner.py"
    tree = ast.parse(path.read_text())
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "max_decode_logits_rows")
    return ast.get_source_segment(path.read_text(), fn)


def test_compat_says_what_the_real_model_runner_does():
    src = _runner_rows_source()
    counts_candidates = "resolve_candidate_steps_from_config" in src
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


def test_a_start_below_the_largest_candidate(tmp_path):
    cfg = tmp_path / "a.json"
    cfg.write_text(json.dumps({"1": {"candidate_steps": [2, 4]}}))
    below = EAGLE3 + ["--speculative-adaptive-config", str(cfg), "--speculative-num-steps", "3",
                      "--speculative-num-draft-tokens", "4"]
    if FAILS_BELOW_LARGEST[sglang_under_test()]:
        with pytest.raises(UserError) as exc:
            check_adaptive(below, [])
        msg = str(exc.value)
        assert "start at 4 draft tokens, below the largest candidate" in msg and "(steps 4)" in msg
        assert msg.endswith("pass --speculative-num-steps 4 --speculative-num-draft-tokens 5")
        # SGLang's built-in table (largest 7) without a file
        with pytest.raises(UserError, match="built-in adaptive table \\(steps 7\\).*--speculative-num-steps 7 "):
            check_adaptive(EAGLE3 + ["--speculative-num-steps", "3"], [])
    else:
        check_adaptive(below, [])
    warnings: list = []
    check_adaptive(below[:-4] + ["--speculative-num-steps", "4"], warnings)  # at the largest: fine everywhere
    check_adaptive(below + ["--disable-cuda-graph"], warnings)  # no graph buffer to size
    check_adaptive(below[:-4], warnings)  # SGLang picks the start itself
    check_adaptive(["--speculative-num-steps", "1"], warnings)  # not adaptive
    assert warnings == []


@pytest.mark.parametrize("flags, says", [
    (["--speculative-eagle-topk", "4"], "--speculative-eagle-topk 4: SGLang adapts at topk 1 only"),
    (["--speculative-algorithm", "NGRAM"], "--speculative-algorithm NGRAM: SGLang supports EAGLE / EAGLE3 only"),
])
def test_settings_under_which_sglang_turns_adaptive_off_are_warned(flags, says):
    warnings: list = []
    check_adaptive(EAGLE3 + ["--speculative-num-steps", "1"] + flags, warnings)  # below 7: no refusal either
    assert len(warnings) == 1 and says in warnings[0] and "runs its static steps" in warnings[0]


def test_the_launcher_refuses_before_anything_starts(capsys):
    from sglang_patches import launch

    if not FAILS_BELOW_LARGEST[sglang_under_test()]:
        pytest.skip("this SGLang sizes its buffers for every candidate: nothing to refuse")
    try:
        code = launch.main(EAGLE3 + ["--speculative-num-steps", "3", "--speculative-num-draft-tokens", "4"])
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("sglang-patches: error: --speculative-adaptive: the server would "
                                                   "start at 4 draft tokens")
