"""`sglang-patches sweep`: grid expansion, prompt files, CLI input errors (CPU only, no server)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sglang_patches.errors import UserError
from sglang_patches.offline.sweep import cli as sweep_cli
from sglang_patches.whatif.grid import Config, config_name, expand_grid, parse_config_name, parse_int_list
from sglang_patches.offline.sweep.prompts import DEFAULT_PROMPTS, load_prompts

REPO = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- grid

def test_grid_counts_baseline_and_topk1_dedupe():
    plan = expand_grid([1, 2, 3, 5], [1, 2, 4], [2, 4, 8])
    names = [config_name(c) for c in plan.configs]
    assert names[0] == "baseline" and plan.configs[0] is None
    chains = [c for c in plan.speculative if c.topk == 1]
    assert [c.name for c in chains] == ["s1_k1_n2", "s2_k1_n3", "s3_k1_n4", "s5_k1_n6"]  # once per steps, n = s+1
    assert len(names) == len(set(names))
    # topk 1: 4 runs, the 12 - 2 (s, n) pairs with n != s + 1 are duplicates;
    # topk 2: 12 -> 4 valid (s1_n2, s2_n4, s3_n4, s5_n8); topk 4: 12 -> 7 valid (tree verify needs n >= s + 1)
    assert len(plan.speculative) == 4 + 4 + 7
    dups = [s for s in plan.skipped if s.topk == 1]
    assert len(dups) == 10 and len(plan.skipped) == 10 + 8 + 5
    assert all(s.duplicate_of == f"s{s.steps}_k1_n{s.steps + 1}" and "steps + 1" in s.reason for s in dups)


def test_grid_validity_rules_and_reasons():
    plan = expand_grid([1, 3], [2], [2, 4, 7, 8])
    ok = {c.name for c in plan.speculative}
    assert ok == {"s1_k2_n2", "s3_k2_n4", "s3_k2_n7"}
    why = {s.name: s.reason for s in plan.skipped}
    # SP008 (preflight's rule): 3 draft tokens needed, steps 1 x topk 2 gives 2 candidates
    assert why["s1_k2_n4"].startswith("SP008:") and "only 2 candidates" in why["s1_k2_n4"]
    # SP008: the tree verify needs draft tokens >= steps + 1 (crashed on the H200 otherwise)
    assert why["s3_k2_n2"].startswith("SP008:") and "< steps + 1 = 4" in why["s3_k2_n2"]
    # candidates 2 + 2*4 = 10 >= 7, but 8 > 3*2 + 1: the sweep's own rule
    assert "steps x topk + 1 = 7" in why["s3_k2_n8"]
    for c in plan.speculative:  # everything planned passes both rules
        assert c.draft_tokens <= c.steps * c.topk + 1


def test_grid_topk1_runs_even_if_steps_plus_one_not_listed():
    plan = expand_grid([4], [1], [2])
    assert [config_name(c) for c in plan.configs] == ["baseline", "s4_k1_n5"]
    assert plan.skipped[0].duplicate_of == "s4_k1_n5"


def test_grid_names_roundtrip_and_flags():
    c = Config(topk=2, steps=3, draft_tokens=6)
    assert parse_config_name(c.name) == c and parse_config_name("baseline") is None
    assert c.server_flags() == ["--speculative-num-steps", "3", "--speculative-eagle-topk", "2",
                                "--speculative-num-draft-tokens", "6"]
    assert Config.from_dict(c.to_dict()) == c


@pytest.mark.parametrize("text", ["1,x", "1.5", "", " , ", "0,1", "-2", "1,,2", "1,2,"])
def test_parse_int_list_rejects(text):
    with pytest.raises(UserError):
        parse_int_list(text, "--steps")


def test_parse_int_list_sorts_and_dedupes():
    assert parse_int_list(" 4,1, 2,4 ", "--topk") == [1, 2, 4]


# ---------------------------------------------------------------- prompts

def test_shipped_prompts():
    prompts = load_prompts(None)
    assert 36 <= len(prompts) <= 44
    rows = [json.loads(x) for x in DEFAULT_PROMPTS.read_text().splitlines()]
    kinds = [r["kind"] for r in rows]
    assert kinds.count("code") == kinds.count("prose")
    assert DEFAULT_PROMPTS.stat().st_size < 20_000


def test_prompt_formats(tmp_path):
    (tmp_path / "a.jsonl").write_text('{"prompt": "x"}\n\n{"text": "y"}\n')
    (tmp_path / "b.txt").write_text("first line\n\n  second  \n")
    (tmp_path / "c").write_text('{"text": "no suffix jsonl"}\n')
    assert load_prompts(tmp_path / "a.jsonl") == ["x", "y"]
    assert load_prompts(tmp_path / "b.txt") == ["first line", "  second  "]
    assert load_prompts(tmp_path / "c") == ["no suffix jsonl"]


@pytest.mark.parametrize("name,data,msg", [
    ("empty.txt", b"", "no prompts"),
    ("blank.jsonl", b"\n  \n", "no prompts"),
    ("bin.txt", b"\x00\x01\x02abc", "binary"),
    ("latin.txt", "caf\u00e9\n".encode("latin-1"), "not UTF-8"),
    ("bad.jsonl", b'{"prompt": "x"}\n{oops\n', "line 2"),
    ("nofield.jsonl", b'{"q": "x"}\n', "no string"),
])
def test_prompt_errors(tmp_path, name, data, msg):
    (tmp_path / name).write_bytes(data)
    with pytest.raises(UserError, match=msg):
        load_prompts(tmp_path / name)


def test_prompt_missing(tmp_path):
    with pytest.raises(UserError, match="no such file"):
        load_prompts(tmp_path / "nope.jsonl")
    with pytest.raises(UserError, match="not a regular file"):
        load_prompts(tmp_path)


# ---------------------------------------------------------------- CLI (in process)

def _model_pair(tmp_path):
    for d in ("t", "d"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "config.json").write_text("{}")
    return ["--model-path", str(tmp_path / "t"), "--speculative-draft-model-path", str(tmp_path / "d")]


def test_dry_run_prints_plan_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "sweep"
    rc = sweep_cli.main([*_model_pair(tmp_path), "--steps", "1,3", "--topk", "1,2", "--draft-tokens", "4,9",
                         "--batch-sizes", "1,64", "--out", str(out), "--dry-run", "--simulate-acc-len", "2.5",
                         "--extra-server-args", "--attention-backend fa3 --mem-fraction-static 0.7"])
    text = capsys.readouterr().out
    assert rc == 0 and not out.exists()
    assert "baseline" in text and "s3_k2_n4" in text and "s1_k1_n2" in text
    assert "s3_k2_n9" in text and "steps x topk + 1" in text  # skipped, with the reason
    assert "--patches none" in text and "SGLANG_SIMULATE_ACC_LEN=2.5" in text
    assert "--attention-backend fa3" in text and "--attention-backend triton" not in text  # default overridden
    assert "--cuda-graph-max-bs-decode 64" in text and "--max-running-requests 64" in text
    assert "--sampling-backend pytorch" in text and "--timing-log" in text
    assert "--search:" not in text


def test_dry_run_with_simulated_acceptance_gives_each_config_its_first_steps_rates(tmp_path, capsys):
    rc = sweep_cli.main([*_model_pair(tmp_path), "--steps", "1,3,5", "--topk", "1", "--batch-sizes", "1",
                         "--out", str(tmp_path / "s"), "--dry-run", "--simulate-acceptance", "0.9,0.8,0.7"])
    lines = {ln.split(":")[0].strip(): ln for ln in capsys.readouterr().out.splitlines() if "sglang_patches.launch" in ln}
    assert rc == 0
    assert lines["s1_k1_n2"].endswith("--simulate-acceptance 0.9")
    assert lines["s3_k1_n4"].endswith("--simulate-acceptance 0.9,0.8,0.7")
    assert lines["s5_k1_n6"].endswith("--simulate-acceptance 0.9,0.8,0.7")  # the launcher pads with 0
    assert "--simulate-acceptance" not in lines["baseline"]


def test_dry_run_with_search_states_the_budget(tmp_path, capsys):
    argv = [*_model_pair(tmp_path), "--steps", "1,2,3,5", "--topk", "1,2,4", "--draft-tokens", "2,4,8",
            "--out", str(tmp_path / "s"), "--dry-run", "--search"]
    assert sweep_cli.main(argv) == 0
    assert ("--search: the baseline and the design s1_k1_n2, s5_k1_n6, s5_k2_n8, s5_k4_n8, then up to 1 "
            "predicted best: at most 5 of the 15 speculative configurations") in capsys.readouterr().out
    assert sweep_cli.main([*argv, "--search-budget", "8"]) == 0
    assert "then up to 4 predicted best: at most 8 of the 15" in capsys.readouterr().out


def test_server_flags_defaults():
    assert sweep_cli.server_flags([], 8) == ["--attention-backend", "triton", "--sampling-backend", "pytorch",
                                             "--cuda-graph-max-bs-decode", "8"]  # the spelling 0.5.17 and 0.5.23 parse
    assert not any(f.startswith("--cuda-graph-max-bs") for f in sweep_cli.server_flags(["--disable-cuda-graph"], 8))
    assert sweep_cli.server_flags(["--cuda-graph-max-bs", "4"], 8).count("--cuda-graph-max-bs-decode") == 0


# ---------------------------------------------------------------- CLI errors: exit 2, one line, no traceback

def _run(args, tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "SGLANG_PATCHES_CACHE": str(tmp_path / "cache")}
    return subprocess.run([sys.executable, "-m", "sglang_patches", "sweep", *args], capture_output=True,
                          text=True, cwd=REPO, env=env, timeout=120)


BAD_INPUTS = {
    "non-integer grid": (["--steps", "1,two"], "not an integer"),
    "zero batch size": (["--batch-sizes", "0,8"], "below 1"),
    "missing model dir": (["MISSING_MODEL"], "no such directory"),
    "no config.json": (["NO_CONFIG"], "has no config.json"),
    "missing prompts": (["--prompts", "PROMPTS_MISSING"], "no such file"),
    "empty prompts": (["--prompts", "PROMPTS_EMPTY"], "no prompts"),
    "binary prompts": (["--prompts", "PROMPTS_BINARY"], "binary"),
    "unknown option": (["--stepz", "1"], "unrecognized arguments"),
    "reserved extra arg": (["--extra-server-args", "--speculative-num-steps 3"], "must not contain"),
    "unbalanced quotes": (["--extra-server-args", "--foo 'bar"], "quote"),
    "bad env": (["--env", "NOEQUALS"], "KEY=VALUE"),
    "resume+force": (["--resume", "--force"], "contradict"),
    "unknown fixture": (["FIXTURE:nope"], "unknown fixture"),
    "simulated acceptance with trees": (["--topk", "1,2", "--simulate-acceptance", "0.8"], "chains"),
    "two simulations": (["--topk", "1", "--simulate-acceptance", "0.8", "--simulate-acc-len", "2"], "choose one"),
    "bad rates": (["--topk", "1", "--simulate-acceptance", "0.8,nan"], "finite"),
    "simulation flag in extra args": (["--extra-server-args", "--simulate-acceptance 0.5"], "must not contain"),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_inputs_exit_2_one_line(tmp_path, case):
    args, expect = BAD_INPUTS[case]
    models = _model_pair(tmp_path)
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "bin.txt").write_bytes(b"\x00\xff\x00")
    (tmp_path / "noconf").mkdir()
    subst = {"PROMPTS_MISSING": str(tmp_path / "missing.jsonl"), "PROMPTS_EMPTY": str(tmp_path / "empty.txt"),
             "PROMPTS_BINARY": str(tmp_path / "bin.txt")}
    if args and args[0] == "MISSING_MODEL":
        models, args = ["--model-path", str(tmp_path / "absent"), *models[2:]], []
    elif args and args[0] == "NO_CONFIG":
        models, args = [*models[:2], "--speculative-draft-model-path", str(tmp_path / "noconf")], []
    elif args and args[0].startswith("FIXTURE:"):
        models, args = ["--fixture", args[0].split(":")[1]], []
    args = [subst.get(a, a) for a in args]
    r = _run([*models, "--out", str(tmp_path / "out"), *args], tmp_path)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sglang-patches: error:"), r.stderr
    assert expect in lines[0]
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "out" / "results.jsonl").exists()


def test_existing_sweep_refused_without_force(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.jsonl").write_text('{"config": "baseline", "batch_size": 1, "status": "ok", "tok_s": 1}\n')
    r = _run([*_model_pair(tmp_path), "--out", str(out), "--steps", "1", "--topk", "1"], tmp_path)
    assert r.returncode == 2 and "already holds a sweep" in r.stderr and "--resume" in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_report_only_without_results(tmp_path):
    r = _run(["--report-only", "--out", str(tmp_path / "none")], tmp_path)
    assert r.returncode == 2 and "holds no rows" in r.stderr and "Traceback" not in r.stderr


def test_help_explains_everything():
    text = sweep_cli.build_parser().format_help()
    for word in ("--fixture", "--resume", "--force", "--search", "--report-only", "--dry-run", "results.jsonl",
                 "summary.md", "steps + 1", "--simulate-acc-len", "--extra-server-args", "Exit status"):
        assert word in text
