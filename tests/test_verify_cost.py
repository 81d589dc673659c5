"""The pure parts of benchmarks/verify_cost.py on CPU: round order, server flags (parsed by the real
SGLang 0.5.17 ServerArgs), cycle statistics from timing records, the differential decode step, the
ratio tables summary.json holds, and one-line refusals of bad arguments."""
from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import verify_cost as vc  # noqa: E402
from sglang_patches.offline.fixtures import FixturePaths  # noqa: E402
from sglang_patches.vocab.schema import make_record  # noqa: E402


def _paths():
    return FixturePaths("qwen3-moe-shape", Path("/fx"), Path("/fx/target"), Path("/fx/draft"), "dummy")


def _rec(cycle, t, bs, verify, rank=0, kind="decode", accepted=None):
    return make_record(cycle=cycle, t=t, rank=rank, kind=kind, bs=bs, steps=3, topk=1, draft_tokens=4,
                       accepted=accepted if accepted is not None else [0] * bs, draft_ms=1.0,
                       verify_ms=verify, extend_ms=0.5, cycle_ms=verify + 1.5, host_gap_ms=0.1)


def test_round_order_baseline_first_then_the_informative_counts():
    rounds = vc.plan_rounds(["qwen3-moe-shape", "llama3-8b"], [2, 4, 6, 8])
    assert [t for t, _ in rounds] == [None, 4, 8, 2, 6]
    assert all(f == ["qwen3-moe-shape", "llama3-8b"] for _, f in rounds)
    assert [t for t, _ in vc.plan_rounds(["tiny"], [3, 8])] == [None, 8, 3]
    one = vc.plan_rounds(["qwen3-moe-shape", "llama3-8b"], [4], parallel=1)
    assert one == [(None, ["qwen3-moe-shape"]), (None, ["llama3-8b"]), (4, ["qwen3-moe-shape"]), (4, ["llama3-8b"])]


def test_server_flags_parse_with_sglang_and_are_what_we_mean():
    pytest.importorskip("sglang")
    from sglang.srt.server_args import ServerArgs

    p = argparse.ArgumentParser()
    ServerArgs.add_cli_args(p)
    spec = vc.server_flags(_paths(), 6, [16, 1, 4], "/x/c.jsonl")
    i = spec.index("--timing-log")
    overlay, sg = spec[i:i + 2], spec[:i] + spec[i + 2:]
    ns = p.parse_args(sg)
    assert ns.speculative_num_steps == 5 and ns.speculative_num_draft_tokens == 6 and ns.speculative_eagle_topk == 1
    assert ns.cuda_graph_bs_decode == [1, 4, 16] and ns.disable_prefill_cuda_graph
    assert ns.max_running_requests == 16 and ns.max_total_tokens == 32768
    assert ns.speculative_algorithm == "EAGLE3" and ns.load_format == "dummy"
    assert overlay == ["--timing-log", "/x/c.jsonl"]
    base = vc.server_flags(_paths(), None, [1, 4, 16], "/x/b.jsonl")
    from sglang_patches.launch_args import overlay_config, split_overlay_args

    ons, rest = split_overlay_args(base)
    ns = p.parse_args(rest)
    assert ns.speculative_algorithm is None and ns.cuda_graph_bs_decode == [1, 4, 16]
    cfg = overlay_config(ons)
    assert "step_timing" in cfg.patches and "timing" in cfg.patches and cfg.timing_log == "/x/b.jsonl"


def test_cycle_stats_keep_only_rank0_decode_cycles_of_the_batch_in_the_window():
    recs = [_rec(1, 10.0, 1, 99.0),                       # before the window (a warm-up cycle)
            *[_rec(c, 20.0 + 0.01 * c, 4, float(c)) for c in range(2, 9)],   # verify 2..8
            _rec(9, 20.2, 3, 50.0),                       # ramp-down: smaller batch
            _rec(5, 20.05, 4, 77.0, rank=1),              # another rank
            _rec(10, 20.3, 4, 66.0, kind="prefill"),
            _rec(11, 40.0, 4, 88.0)]                      # after the window
    s = vc.cycle_stats(recs, 4, 19.0, 30.0)
    assert s["cycles"] == 7 and s["verify_ms"] == 5.0 and s["cycle_ms"] == 6.5
    assert s["wall_ms_per_cycle"] == pytest.approx(10.0)
    assert 7.0 <= s["verify_ms_p90"] <= 8.0 and s["accept_length"] == 1.0
    empty = vc.cycle_stats(recs, 16, 19.0, 30.0)
    assert empty["cycles"] == 0 and empty["verify_ms"] is None and empty["wall_ms_per_cycle"] is None


def test_step_from_walls_is_the_median_differential():
    # 48 extra tokens: 0.240 s more -> 5 ms per step; a noisy pair (7 ms) does not move the median of 3.
    assert vc.step_from_walls([1.0, 1.1, 1.0], [1.24, 1.34, 1.336], 48) == pytest.approx(5.0)
    assert vc.step_from_walls([], [], 48) is None


def test_summary_tables_keyed_by_batch_then_draft_tokens_with_nulls():
    rows = [{"fixture": "qwen3-moe-shape", "draft_tokens": None, "bs": 1, "step_ms": 4.0},
            {"fixture": "qwen3-moe-shape", "draft_tokens": None, "bs": 4, "step_ms": None, "error": "x"},
            {"fixture": "qwen3-moe-shape", "draft_tokens": 4, "bs": 1, "verify_ms": 6.6},
            {"fixture": "qwen3-moe-shape", "draft_tokens": 4, "bs": 4, "verify_ms": 7.0},
            {"fixture": "qwen3-moe-shape", "draft_tokens": 2, "bs": 1, "verify_ms": None}]
    s = vc.summary(rows, ["qwen3-moe-shape"], [1, 4], [2, 4], {"command": "c"})
    assert s["verify_over_step_moe"] == {"1": {"2": None, "4": 1.65}, "4": {"2": None, "4": None}}
    assert s["verify_over_step_dense"] is None and s["command"] == "c" and s["rows"] == rows
    text = vc.format_table(s, ["qwen3-moe-shape"], [1, 4], [2, 4])
    assert "1.65 (6.60)" in text and "4.00" in text


def test_bad_arguments_one_line(tmp_path):
    def run(*a):
        return subprocess.run([sys.executable, str(REPO / "benchmarks" / "verify_cost.py"), *a],
                              capture_output=True, text=True, cwd=REPO, timeout=120)
    for args, word in ((["--fixtures", "nope"], "nope"), (["--draft-tokens", "1,4"], ">= 2"),
                       (["--batch-sizes", "a"], "integers")):
        r = run("--out", str(tmp_path / "o"), *args)
        assert r.returncode == 2 and word in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("keep")
    r = run("--out", str(tmp_path / "full"))
    assert r.returncode == 2 and "not empty" in r.stderr and (tmp_path / "full" / "x").read_text() == "keep"
    h = run("--help")
    assert h.returncode == 0 and "--deadline" in h.stdout and "SIMULATE_ACC_LEN" in h.stdout


def test_run_end_to_end_with_fake_servers(tmp_path, monkeypatch):
    """run() with the process boundary replaced (no GPU here): a fake Server per config, and a fake
    closed batch that writes the timing records a server would (spec: verify 6 ms x T/4; baseline:
    step_timing records of 5 ms GPU, and 4 ms of wall per step); one server fails to start and
    becomes null rows."""
    import json
    import time as _time

    import sglang_patches.offline.sweep.server as srvmod

    monkeypatch.setenv("SGLANG_PATCHES_CACHE", str(tmp_path / "cache"))
    logs, real_sleep = {}, _time.sleep

    class FakeServer:
        def __init__(self, args, *, port, log_path, env=None, **_):
            self.args, self.url, self.started_s = args, f"http://x:{port}", None
            self.fixture = "llama3-8b" if "llama3-8b" in " ".join(args) else "qwen3-moe-shape"
            self.spec = "--speculative-num-draft-tokens" in args
            self.t = int(args[args.index("--speculative-num-draft-tokens") + 1]) if self.spec else None
            logs[self.url] = (args[args.index("--timing-log") + 1], self.t)
            assert (env or {}).get("SGLANG_SIMULATE_ACC_LEN") == ("1.0" if self.spec else None)

        def start(self):
            return self

        def wait_ready(self, timeout):
            if self.fixture == "llama3-8b" and self.t == 8:
                raise srvmod.ServerError("server exited with code 1: OOM")
            self.started_s = 42.0
            return self

        def stop(self):
            pass

    def fake_batch(url, prompts, max_new_tokens, timeout=300.0):
        bs = len(prompts)
        path, t = logs[url]
        now = _time.time()
        with open(path, "a") as fh:
            for c in range(max_new_tokens):
                r = _rec(c, now + 0.001 * c, bs, 6.0 * t / 4) if t else make_record(
                    cycle=c, t=now + 0.001 * c, rank=0, kind="decode", bs=bs, steps=0, topk=0, draft_tokens=0,
                    accepted=[], draft_ms=None, verify_ms=None, extend_ms=None, cycle_ms=5.0, host_gap_ms=0.1)
                fh.write(json.dumps(r) + "\n")
        real_sleep(0.01 + 0.001 * max_new_tokens)
        return 0.2 + 0.004 * max_new_tokens

    monkeypatch.setattr(srvmod, "Server", FakeServer)
    monkeypatch.setattr(vc, "run_closed_batch", fake_batch)
    monkeypatch.setattr(vc.time, "sleep", lambda s: None if s > 1 else real_sleep(s))
    args = vc.parse_args(["--out", str(tmp_path / "o"), "--batch-sizes", "1,4", "--cycles", "8",
                          "--deadline", "0"])
    summ = vc.run(args)
    moe, dense = summ["verify_over_step_moe"], summ["verify_over_step_dense"]
    assert moe == {bs: {"2": 0.6, "4": 1.2, "6": 1.8, "8": 2.4} for bs in ("1", "4")}
    assert dense["1"]["8"] is None and dense["4"]["4"] == 1.2
    bad = [r for r in summ["rows"] if r.get("error")]
    assert {(r["fixture"], r["draft_tokens"]) for r in bad} == {("llama3-8b", 8)} and "OOM" in bad[0]["error"]
    on_disk = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert on_disk["verify_over_step_moe"] == moe and on_disk["command"].startswith(shlex.quote(sys.executable))
    wall = summ["verify_over_step_wall_by_fixture"]["qwen3-moe-shape"]
    assert wall["1"]["4"] == pytest.approx(6.0 / 4.0)  # the wall step (4 ms) kept for comparison
    base = [r for r in summ["rows"] if r["draft_tokens"] is None and r["fixture"] == "llama3-8b"]
    assert all(r["step_ms"] == 5.0 and r["step_cycles"] == 8 and r["step_wall_ms"] == pytest.approx(4.0)
               for r in base)
    assert summ["routing"] == "model" and summ["moe"]["qwen3-moe-shape"]["experts"] == 128
    assert summ["moe"]["qwen3-moe-shape"]["expected_distinct_experts_per_layer_bs1"] is None  # dummy router: unknown
    assert "llama3-8b" not in summ["moe"]


def test_uniform_routing_is_sglangs_own_switch_and_its_spread_matches_the_rule():
    """--routing uniform sets the environment switch the compat file names; it is an attribute of the real
    SGLang's Envs (the version under test), read as a bool. The closed form for the expected distinct experts
    is checked against a draw of SGLang's rule (offset + j * (E // k) mod E, as in select_experts)."""
    import random

    from sglang.srt import environ

    from sglang_patches.compat import current

    name = current().UNIFORM_EXPERTS_ENV.name
    assert vc.routing_env("uniform") == {name: "1"} and vc.routing_env("model") == {}
    assert hasattr(environ.Envs, name) and isinstance(getattr(environ.Envs, name), environ.EnvBool)
    rng = random.Random(0)
    for e, k in ((16, 8), (128, 8), (384, 8), (60, 4)):
        step = e // k
        for tokens in (1, 2, 4, 8, 32):
            draws = [len({(o + j * step) % e for o in (rng.randrange(e) for _ in range(tokens)) for j in range(k)})
                     for _ in range(4000)]
            mean = sum(draws) / len(draws)
            assert abs(vc.distinct_experts_uniform(e, k, tokens) - mean) < 0.02 * mean + 0.05, (e, k, tokens, mean)
            assert vc.distinct_experts_uniform(e, k, tokens) <= min(k * tokens, e)
    assert vc.distinct_experts_uniform(10, 3, 2) is None  # k does not divide E: no closed form


def test_moe_shape_of_the_built_in_fixtures():
    from sglang_patches.offline.fixtures.specs import get_spec

    shapes = {n: vc.moe_shape(get_spec(n).target) for n in ("kimi-k2-mla", "qwen3-moe-shape", "llama3-8b")}
    assert shapes["kimi-k2-mla"] == (16, 8) and shapes["qwen3-moe-shape"] == (128, 8)
    assert shapes["llama3-8b"] is None


def test_your_own_model_is_measured_in_place_of_the_fixtures(tmp_path):
    """--model / --draft: one-line refusals before anything starts, then SGLang's real ServerArgs parse the
    flags of a server of the user's checkpoints (real weights: load format auto), under the target folder's name."""
    def run(*a):
        return subprocess.run([sys.executable, str(REPO / "benchmarks" / "verify_cost.py"), *a],
                              capture_output=True, text=True, cwd=REPO, timeout=120)
    target, draft = tmp_path / "Kimi-K2-Instruct", tmp_path / "kimi-eagle3"
    for d in (target, draft):
        d.mkdir()
    for args, word in ((["--model", str(target)], "go together"),
                       (["--model", str(target), "--draft", str(draft)], "no config.json"),
                       (["--model", str(target), "--draft", str(draft), "--fixtures", "llama3-8b"], "exclude each other")):
        r = run("--out", str(tmp_path / "o"), *args)
        assert r.returncode == 2 and word in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    for d in (target, draft):
        (d / "config.json").write_text("{}")
    args = vc.parse_args(["--out", str(tmp_path / "o"), "--model", str(target), "--draft", str(draft)])
    assert args.fixtures == ["Kimi-K2-Instruct"]
    paths = vc.own_paths(args)["Kimi-K2-Instruct"]
    assert paths.target == target.resolve() and paths.draft == draft.resolve()
    pytest.importorskip("sglang")
    from sglang.srt.server_args import ServerArgs

    p = argparse.ArgumentParser()
    ServerArgs.add_cli_args(p)
    spec = vc.server_flags(paths, 4, [1], None, ["--tp-size", "8"])
    ns = p.parse_args(spec)
    assert ns.model_path == str(target.resolve()) and ns.speculative_draft_model_path == str(draft.resolve())
    assert ns.load_format == "auto" and ns.speculative_draft_load_format == "auto" and ns.tp_size == 8
    assert ns.speculative_algorithm == "EAGLE3" and ns.speculative_num_draft_tokens == 4
    dry = run("--out", str(tmp_path / "o2"), "--model", str(target), "--draft", str(draft), "--dry-run",
              "--draft-tokens", "4", "--extra", "--tp-size 8", "--routing", "uniform")
    assert dry.returncode == 0 and "Kimi-K2-Instruct" in dry.stdout, dry.stdout + dry.stderr
    # each server's command with its environment, as the run starts it (server_spec), parsed by SGLang's ServerArgs
    said = {ln.split(": ")[1]: ln.split(": ", 2)[2] for ln in dry.stdout.splitlines() if ln.startswith("server: ")}
    assert set(said) == {"baseline", "T=4"}
    env_t4, cmd_t4 = said["T=4"].split(" python -m sglang_patches.launch ")
    assert env_t4 == "SGLANG_SIMULATE_UNIFORM_EXPERTS=1 SGLANG_SIMULATE_ACC_LEN=1.0"  # every draft rejected
    assert said["baseline"].startswith("SGLANG_SIMULATE_UNIFORM_EXPERTS=1 python -m sglang_patches.launch ")
    ns = p.parse_known_args(shlex.split(cmd_t4))[0]
    assert (ns.tp_size, ns.port, ns.speculative_num_draft_tokens) == (8, 31000, 4)
    said = {k: v.split(" python -m sglang_patches.launch ")[-1].removeprefix("python -m sglang_patches.launch ")
            for k, v in said.items()}
    base, launcher_only = p.parse_known_args(shlex.split(said["baseline"]))
    assert base.speculative_algorithm is None and launcher_only == [
        "--patches", "marker,timing,step_timing", "--timing-log", str(tmp_path / "o2" / "logs" / "Kimi-K2-Instruct-base.jsonl")]
