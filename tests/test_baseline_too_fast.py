"""A plain decode baseline too fast to be this server's: a verify of T draft tokens costs at most about T
plain steps of the same target on the same GPU, so a plain step under verify / (T + 1) is another model's
(a smaller one, another GPU, more TP ranks). advise, report and advise --adaptive-config warn in one line
right after the verdict, whether the baseline came as --baseline-step-ms or as a plain server's log given
as a second LOG; a baseline that fits the log gets no warning."""
from __future__ import annotations

from advisor_logs import records_from_accepted, write_records
from test_adaptive_config_cli import _plain_server_log
from test_verdict_everywhere import run
from sglang_patches.offline.advise_inputs import baseline_too_fast
from sglang_patches.whatif.advisor_observation import BsCost, Observation

WARN = "warning: batch 1: the log's verify of 4 tokens (6.00 ms)"


def _spec_log(tmp_path):
    """Steps 3 (4 draft tokens) at batch 1, verify 6.0 ms."""
    return write_records(tmp_path / "s3.jsonl", records_from_accepted(
        [3, 2, 0, 1, 3, 1] * 60, 1, 3, draft_ms=1.0, verify_ms=6.0, extend_ms=0.5, gap_ms=0.1))


def _run(capsys, *args) -> tuple[int, list[str]]:
    code, out = run(capsys, *args)
    return code, out.splitlines()


def _verdict_len(lines: list[str]) -> int:
    """Where the verdict ends: the first warning line."""
    return next(i for i, ln in enumerate(lines) if ln.startswith("warning: "))


def test_the_rule_fires_only_past_t_plus_one_plain_steps():
    obs = Observation(steps=3, topk=1, draft_tokens=4, hist=[1, 1, 1, 1],
                      costs=[BsCost(bs=1, cycles=100, draft_ms=1, verify_ms=6.0, extend_ms=0.5, cycle_ms=7.6, gap_ms=0.1),
                             BsCost(bs=8, cycles=100, draft_ms=1, verify_ms=9.0, extend_ms=0.5, cycle_ms=10.6,
                                    gap_ms=0.1)])
    assert baseline_too_fast(obs, {1: 1.25, 8: 1.9}) == []          # 4.8x and 4.7x: within 5
    [line] = baseline_too_fast(obs, {1: 1.1, 8: 1.0})                # 5.5x and 9.0x: the worst is named
    assert line == ("warning: batch 8: the log's verify of 4 tokens (9.00 ms) is 9.0x the plain step used "
                    "(1.00 ms): another model?")
    assert len(line) <= 120
    assert baseline_too_fast(obs, {1: 1.0}) != [] and baseline_too_fast(obs, {16: 0.1}) == []  # only logged sizes


def test_advise_report_and_adaptive_config_warn_after_the_same_verdict(tmp_path, capsys):
    spec = _spec_log(tmp_path)
    code, advise = _run(capsys, "advise", spec, "--baseline-step-ms", "0.9")
    assert code == 0
    at = _verdict_len(advise)
    assert advise[at].startswith(WARN) and advise[at].endswith("is 6.7x the plain step used (0.90 ms): another model?")
    code, report = _run(capsys, "report", spec, "--baseline-step-ms", "0.9")
    assert code == 0 and WARN in "\n".join(report)
    verdict = [ln for ln in advise[:at] if not ln.startswith("plain decode step used")]  # advise's detail line
    i = report.index(verdict[0])
    assert report[i:i + len(verdict)] == verdict and report[i + len(verdict)].startswith(WARN)
    code, cfg = _run(capsys, "advise", spec, "--baseline-step-ms", "0.9", "--adaptive-config", tmp_path / "a.json")
    assert code == 0 and any(ln.startswith(WARN) for ln in cfg[:8])


def test_a_plain_server_log_of_another_model_given_as_second_log_is_warned(tmp_path, capsys):
    spec = _spec_log(tmp_path)
    small = _plain_server_log(tmp_path / "plain-1b.jsonl", ms=0.8)  # 0.8 + 0.1 gap: 6.7x under the verify
    code, out = _run(capsys, "advise", spec, small)
    assert code == 0 and out[_verdict_len(out)].startswith(WARN)
    same = _plain_server_log(tmp_path / "plain-8b.jsonl", ms=5.2)   # this target's plain step: no warning
    code, out = _run(capsys, "advise", spec, same)
    assert code == 0 and not any(ln.startswith("warning: ") for ln in out)
    code, out = _run(capsys, "report", spec, small)
    assert code == 0 and any(ln.startswith(WARN) for ln in out)


def test_one_step_for_several_batch_sizes_is_no_other_model(tmp_path, capsys):
    """One --baseline-step-ms stands for every logged batch size: at the larger ones it is too fast by
    construction, which the one-step note says; no 'another model?' warning."""
    one = records_from_accepted([3, 2, 0, 1] * 60, bs=1, steps=3, verify_ms=6.0)
    many = records_from_accepted([3, 2, 0, 1] * 640, bs=64, steps=3, verify_ms=40.0, start_cycle=len(one))
    log = write_records(tmp_path / "two.jsonl", one + many)
    code, out = _run(capsys, "advise", log, "--baseline-step-ms", "5.5")
    assert code == 0 and not any(ln.startswith("warning: ") for ln in out), out
    code, out = _run(capsys, "advise", log, "--baseline-step-ms", "1:5.5,64:5.5")  # a table names each: checked
    assert code == 0 and any(ln.startswith("warning: batch 64: the log's verify of 4 tokens") for ln in out)


def test_with_verify_cost_the_same_cause_is_one_warning(tmp_path, capsys):
    from pathlib import Path

    measured = (Path(__file__).resolve().parent.parent / "benchmarks" / "results" / "2026-12-06-kimi-family"
                / "llama_head" / "verify_cost.json")
    code, out = _run(capsys, "advise", _spec_log(tmp_path), "--baseline-step-ms", "0.9",
                     "--verify-cost", f"{measured}:kimi-k2-mla")
    assert code == 0
    assert [ln for ln in out if ln.startswith("warning: ")] == [next(ln for ln in out if ln.startswith(WARN))]
    code, out = _run(capsys, "advise", _spec_log(tmp_path), "--baseline-step-ms", "2.0",
                     "--verify-cost", f"{measured}:kimi-k2-mla")  # 3.0x: not too fast, yet far off the measured 1.61x
    assert code == 0 and [ln for ln in out if ln.startswith("warning: ")] != []
    assert not any(ln.startswith(WARN) for ln in out)


def test_adaptive_config_json_lists_the_warning_once(tmp_path, capsys):
    import json

    code, out = _run(capsys, "advise", _spec_log(tmp_path), "--baseline-step-ms", "0.9",
                     "--adaptive-config", tmp_path / "a.json", "--json")
    assert code == 0
    d = json.loads("\n".join(out))
    assert [w for w in d["warnings"] if w.startswith(WARN)] != []
    assert len([ln for ln in d["lines"] if ln.startswith(WARN)]) == 1
