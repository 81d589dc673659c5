"""benchmarks/moe_expert_spread.py on CPU: the distinct-expert count over SGLang's per-pass recorder records
(forward modes from SGLang's real ForwardMode), the dump reader's refusal of anything but tensors and
numbers (never executed), and one-line refusals of bad arguments before anything starts. The records are
built here in the format of the recorder's per_token mode (`_DetailSinglePassGatherer.collect`, the mode the
script runs): the recorder itself needs a CUDA server."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
torch = pytest.importorskip("torch")
ForwardMode = pytest.importorskip("sglang.srt.model_executor.forward_batch_info").ForwardMode


@pytest.fixture
def mes(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import moe_expert_spread

    return moe_expert_spread


def _rec(mode, tokens, counts):
    return {"forward_pass_id": 0, "rank": 0, "forward_mode": int(mode), "input_ids": list(range(tokens)),
            "global_physical_count": torch.tensor(counts, dtype=torch.int32)}


def test_distinct_experts_per_moe_layer_over_the_passes_of_one_kind(mes):
    verify = ForwardMode[mes.pass_mode(4)]
    assert verify == ForwardMode.TARGET_VERIFY and ForwardMode[mes.pass_mode(1)] == ForwardMode.DECODE
    dense = [0, 0, 0, 0]
    records = [
        _rec(verify, 4, [dense, [3, 1, 0, 0], [1, 1, 1, 1]]),    # layer 0 dense: left out; 2 and 4 experts
        _rec(verify, 4, [dense, [4, 0, 0, 0], [2, 2, 0, 0]]),    # 1 and 2
        _rec(verify, 8, [dense, [1, 1, 1, 1], [1, 1, 1, 1]]),    # another T: not counted
        _rec(ForwardMode.DECODE, 4, [dense, [1, 1, 1, 1], [1, 1, 1, 1]]),  # another kind of pass
        _rec(verify, 4, [dense, dense, dense]),                  # the drafter's passes route nothing
        {**_rec(verify, 4, [dense, [1, 1, 1, 1], [1, 1, 1, 1]]), "rank": 1},  # TP rank 1 records the same passes
    ]
    got = mes.spread(records, int(verify), 4)
    assert got == {"passes": 2, "distinct_mean": 2.25, "distinct_min": 1, "distinct_max": 4}
    assert mes.spread(records, int(ForwardMode.DECODE), 1)["passes"] == 0


def test_dumps_are_read_as_tensors_and_numbers_only(mes, tmp_path):
    rec = _rec(ForwardMode.TARGET_VERIFY, 2, [[0, 0], [1, 1]])
    torch.save({"records": [rec], "last_physical_to_logical_map": torch.zeros(2, 2)},
               tmp_path / "expert_distribution_recorder_1.0_0.pt")
    got = mes.load_dumps(str(tmp_path))
    assert len(got) == 1 and got[0]["forward_mode"] == int(ForwardMode.TARGET_VERIFY)
    assert mes.spread(got, int(ForwardMode.TARGET_VERIFY), 2)["distinct_mean"] == 2


class _Payload:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):  # what a hostile file would make an unpickler run
        return (Path.touch, (self.marker,))


def test_a_dump_holding_code_is_refused_in_one_line_and_never_run(mes, tmp_path):
    marker = tmp_path / "EXECUTED"
    torch.save({"records": [_Payload(marker)]}, tmp_path / "expert_distribution_recorder_2.0_0.pt")
    from sglang_patches.errors import UserError

    with pytest.raises(UserError) as err:
        mes.load_dumps(str(tmp_path))
    assert "not a recorder dump" in str(err.value) and "\n" not in str(err.value)
    assert not marker.exists()


@pytest.mark.parametrize("argv,said", [
    (["--fixture", "llama3-8b"], "not an MoE fixture"),
    (["--draft-tokens", "0,4"], "must be >= 1"),
    (["--draft-tokens", "four"], "e.g. --draft-tokens 1,4,8"),
])
def test_bad_arguments_are_refused_in_one_line_before_anything_starts(tmp_path, argv, said):
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, str(REPO / "benchmarks" / "moe_expert_spread.py"), "--out", str(out), *argv],
                       capture_output=True, text=True, cwd=REPO, timeout=120)
    err = r.stderr.strip()
    assert r.returncode != 0 and len(err.splitlines()) == 1 and "Traceback" not in err and said in err, err
    assert not out.exists()


def test_the_recorder_folder_is_a_declared_contact():
    from sglang_patches.compat import current

    assert current().EXPERT_RECORDER_DIR_ENV.name == "SGLANG_EXPERT_DISTRIBUTION_RECORDER_DIR"


def test_a_fixture_routing_more_experts_than_the_recorder_keeps_is_refused(tmp_path, monkeypatch, capsys):
    """SGLang's per-token recorder keeps 8 experts a token: a top-9 target would be counted short."""
    import dataclasses

    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import moe_expert_spread as m
    from sglang_patches.offline.fixtures import specs

    spec = specs.get_spec("kimi-k2-mla")
    top9 = dataclasses.replace(spec, target={**spec.target, "num_experts_per_tok": 9})
    monkeypatch.setattr(specs, "get_spec", lambda name: top9)
    with pytest.raises(SystemExit) as exc:
        m.main(["--out", str(tmp_path / "out"), "--fixture", "kimi-k2-mla", "--dry-run"])
    err = capsys.readouterr().err.strip()
    assert exc.value.code != 0 and len(err.splitlines()) == 1 and "top_k 9" in err and "keeps 8" in err
    assert not (tmp_path / "out").exists()


def test_an_out_folder_with_files_is_refused_and_left_as_it_was(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.json").write_text("{}")
    r = subprocess.run([sys.executable, str(REPO / "benchmarks" / "moe_expert_spread.py"), "--out", str(out)],
                       capture_output=True, text=True, cwd=REPO, timeout=120)
    err = r.stderr.strip()
    assert r.returncode != 0 and len(err.splitlines()) == 1 and "Traceback" not in err and "not empty" in err, err
    assert [p.name for p in out.iterdir()] == ["summary.json"] and (out / "summary.json").read_text() == "{}"


def test_each_measured_row_lands_in_summary_json_with_its_bound_and_expected_value(tmp_path, monkeypatch, capsys):
    """The run's bookkeeping around the servers: `measure` (a CUDA server and SGLang's recorder) is replaced by
    rows of the shape it returns, the fixture build by its paths; the summary, bounds, expected values and the
    table are this script's own code."""
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import moe_expert_spread as m
    from sglang_patches.offline import fixtures

    monkeypatch.setattr(fixtures, "ensure_fixture", lambda name: {"target": "t", "draft": "d"})
    rows = {1: {"passes": 32, "distinct_mean": 8.0, "distinct_min": 8, "distinct_max": 8},
            4: {"error": "ServerError: did not start"}}
    monkeypatch.setattr(m, "measure", lambda args, paths, t, port: {"tokens": t, **rows[t]})
    out = tmp_path / "out"
    assert m.main(["--out", str(out), "--fixture", "kimi-k2-mla", "--draft-tokens", "1,4"]) == 0
    s = __import__("json").loads((out / "summary.json").read_text())
    assert (s["fixture"], s["experts"], s["top_k"], s["routing"]) == ("kimi-k2-mla", 16, 8, "uniform")
    assert s["command"] and s["date"] and "sglang" in s["env"]  # run_meta's header
    one, four = s["rows"]
    assert (one["distinct_mean"], one["bound_k_times_T"], one["expected_uniform"]) == (8.0, 8, 8.0)
    assert four["error"].startswith("ServerError") and four["bound_k_times_T"] == 16
    assert four["expected_uniform"] == 15.0  # 16 x (1 - (1 - 8/16)^4): a layer's experts under uniform routing
    table = capsys.readouterr().out.splitlines()
    assert table[0].startswith("kimi-k2-mla, 16 experts top 8") and "did not start" in table[-1]
