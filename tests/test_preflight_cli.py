"""CLI and bad-input half of the preflight tests. `sglang-patches preflight`: every rule firing and not firing, on configs shaped like public models.

Checkpoints are written into tmp dirs: config.json plus header-only safetensors with a sparse zero
data region (no real weights, no torch).
"""
from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from sglang_patches.errors import UserError
from sglang_patches.offline.preflight import run_preflight
from sglang_patches.offline.preflight import cli as pf_cli
from sglang_patches.offline.preflight import model_info

from preflight_models import (KIMI_K2, KIMI_K25, LLAMA_8B, QWEN3_8B, REPO, codes, eagle3_cfg,  # noqa: F401
                              eagle3_tensors, kimi, llama, make_dir, only,
                              target_cfg, write_st)


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "sglang_patches", "preflight", *args],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


def assert_exit2(proc: subprocess.CompletedProcess, needle: str) -> None:
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sglang-patches: error: "), proc.stderr
    assert needle in lines[0] and "Traceback" not in proc.stderr


def flags(t, d, algo="EAGLE3"):
    return ["--model-path", str(t), "--speculative-draft-model-path", str(d), "--speculative-algorithm", algo]


def test_cli_missing_dir(tmp_path, llama):
    assert_exit2(run_cli(*flags(tmp_path / "nope", llama[1])), "does not exist")


def test_cli_non_json_config(tmp_path, llama):
    d = make_dir(tmp_path, "bad", None)
    (d / "config.json").write_text("{hidden_size: 4096")
    assert_exit2(run_cli(*flags(llama[0], d)), "is not valid JSON")


def test_cli_corrupt_header(tmp_path, llama):
    (llama[1] / "model.safetensors").write_bytes(struct.pack("<Q", 9) + b"garbage!!")
    assert_exit2(run_cli(*flags(*llama)), "corrupt safetensors header")


def test_cli_truncated_and_missing_shard(tmp_path, llama):
    f = llama[1] / "model.safetensors"
    with open(f, "r+b") as fh:
        fh.truncate(f.stat().st_size // 2)
    assert_exit2(run_cli(*flags(*llama)), "truncated")
    (llama[1] / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"fc.weight": "x.safetensors"}}))
    assert_exit2(run_cli(*flags(*llama)), "missing shard")


def test_cli_unknown_flag_and_algorithm(llama):
    # a flag preflight does not know is taken for an SGLang flag: ignored, and named in one note line
    r = run_cli(*flags(*llama), "--frobnicate")
    assert r.returncode == 0 and r.stderr == "sglang-patches: note: ignored SGLang (or unknown) flags preflight does not need: " \
                                             "--frobnicate\n"
    assert_exit2(run_cli(*flags(*llama), str(llama[0])), "unrecognized arguments: " + str(llama[0]))  # no flag
    assert_exit2(run_cli(*flags(*llama, algo="MEDUSA")), "unknown --speculative-algorithm")
    assert_exit2(run_cli("--model-path", str(llama[0])), "required")
    # a typo of a required flag is named as one (neither SGLang's nor preflight's), with the flag it is near
    assert_exit2(run_cli("--model-pth", str(llama[0]), "--draft", str(llama[1])),
                 "--model-pth is neither an SGLang flag nor one preflight reads; did you mean --model-path?")
    assert_exit2(run_cli(*flags(*llama), "--speculative-num-steps", "five"), "invalid int value")


@pytest.mark.parametrize("config, needle", [
    ({"num_hidden_layers": 32}, "lacks hidden_size"),
    ({"hidden_size": 4096}, "lacks num_hidden_layers"),
    ({"hidden_size": "4096", "num_hidden_layers": 32}, "must be a positive integer"),
    ([1, 2], "must hold a JSON object"),
    ({"hidden_size": 4096, "num_hidden_layers": 1, "eagle_config": {"eagle_aux_hidden_state_layer_ids": "1,2"}},
     "list of integer layer ids"),
    ({"text_config": {"num_hidden_layers": 61}}, "lacks hidden_size"),
])
def test_config_lacking_fields(tmp_path, llama, config, needle):
    d = make_dir(tmp_path, "bad", None)
    (d / "config.json").write_text(json.dumps(config))
    with pytest.raises(UserError) as exc:
        run_preflight(llama[0], d, "EAGLE3")
    assert needle in str(exc.value) and exc.value.code == 2 and "\n" not in str(exc.value)


def test_missing_config_and_not_a_dir(tmp_path, llama):
    d = make_dir(tmp_path, "empty", None)
    with pytest.raises(UserError, match="has no config.json"):
        run_preflight(d, llama[1], "EAGLE3")
    with pytest.raises(UserError, match="is not a directory"):
        run_preflight(llama[0], llama[1] / "model.safetensors", "EAGLE3")
    with pytest.raises(UserError, match="hf download org/model"):
        run_preflight("org/model", llama[1], "EAGLE3")


def test_unreadable_directory(tmp_path, llama, monkeypatch):
    d = llama[1]
    if os.geteuid() != 0:
        d.chmod(0)
        try:
            assert_exit2(run_cli(*flags(llama[0], d)), "not readable")
        finally:
            d.chmod(0o755)
    else:  # root reads everything; simulate the permission check
        real = os.access
        monkeypatch.setattr(model_info.os, "access", lambda p, m: False if Path(p) == d else real(p, m))
        with pytest.raises(UserError, match="not readable"):
            run_preflight(llama[0], d, "EAGLE3")
    (d / "config.json").unlink()
    (d / "config.json").mkdir()
    assert_exit2(run_cli(*flags(llama[0], d)), "is a directory")


# ---------------------------------------------------------------- CLI behaviour

def test_cli_ok_and_problems_exit_codes(kimi):
    ok = run_cli(*flags(*kimi), "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
                 "--speculative-num-draft-tokens", "4")
    assert ok.returncode == 0 and "compatible: 0 error(s)" in ok.stdout and ok.stderr == ""
    bad = run_cli("--model-path", str(kimi[0]), "--speculative-draft-model", str(kimi[1]),
                  "--speculative-algorithm", "EAGLE")
    assert bad.returncode == 1 and bad.stderr == ""
    assert "ERROR   SP001  drafter fc expects 21504 = 3 x 7168 from layers [1, 29, 57]" in bad.stdout
    assert "fix: --speculative-algorithm EAGLE3" in bad.stdout


def test_cli_json_in_process(kimi, capsys):
    assert pf_cli.main(flags(*kimi, algo="EAGLE") + ["--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is False and data["exit_code"] == 1
    assert data["findings"][0]["code"] == "SP001" and data["draft"]["fc_shape"] == [7168, 21504]
    assert data["draft"]["aux_layer_ids"] == [1, 29, 57]


def test_cli_help_explains_exit_codes(capsys):
    assert pf_cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "exit codes" in out and "unusable input" in out and "--speculative-draft-model" in out
    for code in ("SP001", "SP008"):
        assert code in out


def test_cli_in_process_unknown_flag_raises_user_error():
    with pytest.raises(UserError, match="required: --model-path, --speculative-draft-model-path .ignored as SGLang "
                                        r"\(or unknown\) flags preflight does not need: --bogus"):
        pf_cli.main(["--bogus"])


def test_no_torch_no_sglang_and_no_writes(kimi):
    before = {p: p.stat().st_mtime_ns for root in kimi for p in [root, *root.iterdir()]}
    code = ("import sys; from sglang_patches.offline.preflight import run_preflight; "
            f"r = run_preflight({str(kimi[0])!r}, {str(kimi[1])!r}, 'EAGLE'); "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('torch', 'sglang', 'transformers')]; "
            "assert not bad, bad; assert not r.ok; print('clean')")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "clean" in proc.stdout, proc.stderr
    after = {p: p.stat().st_mtime_ns for root in kimi for p in [root, *root.iterdir()]}
    assert before == after


def test_a_flag_near_one_preflight_reads_is_refused_not_ignored(llama):
    """Ignoring `--speculative-algoritm EAGLE` checked the pair as EAGLE3 and called it compatible, where the
    typed EAGLE is the SP001 error; SGLang's abbreviation `--speculative-algo` was ignored the same way."""
    assert_exit2(run_cli(*flags(*llama)[:4], "--speculative-algoritm", "EAGLE"),
                 "--speculative-algoritm is neither an SGLang flag nor one preflight reads; "
                 "did you mean --speculative-algorithm?")
    assert_exit2(run_cli(*flags(*llama)[:4], "--speculative-algo", "EAGLE"),
                 "--speculative-algo abbreviates --speculative-algorithm; write it out")
    typed = run_cli(*flags(*llama, algo="EAGLE"))
    assert typed.returncode == 1 and "SP001" in typed.stdout  # what the typo hid
    r = run_cli(*flags(*llama), "--tp-size", "2", "--mem-fraction-static", "0.8")  # far from ours: a note
    assert r.returncode == 0 and "--tp-size, --mem-fraction-static" in r.stderr



def test_no_sglang_flag_is_a_near_miss_of_a_preflight_flag():
    """preflight refuses near misses without importing SGLang; that is right only while no flag of the
    installed SGLang (each supported version runs this suite) is a near miss of one preflight reads."""
    from sglang_patches.launch_args import sglang_parser

    ours = [o for o in pf_cli.build_parser()._option_string_actions if o.startswith("--") and o != "--help"]
    sglang = [o for o in sglang_parser()._option_string_actions if o.startswith("--") and o not in ours]
    assert len(sglang) > 400  # the real parser, not an empty stand-in
    assert [(f, pf_cli.near_miss(f, ours)) for f in sglang if pf_cli.near_miss(f, ours)] == []
