"""The SGLang server flags the overlay writes (the sweep's servers, advise's printed launch) parse
with the REAL server parser of the SGLang under test (tests/run_cpu.sh runs this on 0.5.17 and
0.5.23). 0.5.23 dropped `--cuda-graph-bs` / `--cuda-graph-max-bs`: argparse refuses them there as
ambiguous prefixes of the -decode / -prefill pairs, so a command written with them would not start."""
from __future__ import annotations

import argparse
import json

import pytest

from advisor_logs import records_from_accepted, write_records
from conftest import sglang_under_test
from sglang_patches.offline import advise_cli
from sglang_patches.offline.sweep.cli import server_flags


@pytest.fixture(scope="module")
def parse():
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser(prog="sglang serve", exit_on_error=False)
    ServerArgs.add_cli_args(parser)

    def run(flags: list[str]):
        return parser.parse_args(["--model-path", "/m", *flags])
    return run


def test_the_old_spellings_are_what_this_version_says(parse):
    """What the fix is for: on 0.5.23 the old spelling does not parse; on 0.5.17 it is an alias."""
    if sglang_under_test() == "0.5.23":
        with pytest.raises((SystemExit, argparse.ArgumentError)):
            parse(["--cuda-graph-max-bs", "8"])
    else:
        assert parse(["--cuda-graph-max-bs", "8"]).cuda_graph_max_bs_decode == 8


def test_the_sweeps_server_flags_parse(parse):
    args = parse(server_flags([], 64))
    assert args.cuda_graph_max_bs_decode == 64 and args.attention_backend == "triton"
    assert args.sampling_backend == "pytorch" and args.max_running_requests == 64
    kept = server_flags(["--cuda-graph-max-bs-decode", "16"], 8)  # the user's own value is not doubled
    assert kept.count("--cuda-graph-max-bs-decode") == 1 and parse(kept).cuda_graph_max_bs_decode == 16


@pytest.mark.parametrize("given", ["--cuda-graph-bs-decode", "--cuda-graph-bs"])
def test_advises_printed_launch_parses(parse, tmp_path, capsys, given):
    """advise takes the server's graph sizes under either spelling and prints the one this SGLang
    parses; the pasted flags give SGLang the graph sizes and start steps the file was priced for.
    Buckets 1 and 8 get different chains here (one chain everywhere gets a fixed server's flags: below)."""
    from test_adaptive_config import two_bucket_log

    log = two_bucket_log(tmp_path / "s5.jsonl")
    out = tmp_path / "a.json"
    assert advise_cli.main([str(log), "--adaptive-config", str(out), "--baseline-step-ms", "6.5",
                            given, "1", "2", "4", "8"]) == 0
    line = capsys.readouterr().out.splitlines()[-1]
    flags = line.split("run the EAGLE3 server with ", 1)[1].split(" (in place of")[0].split()
    args = parse(["--speculative-algorithm", "EAGLE3", *flags])
    cfg = json.loads(out.read_text())
    top = max(s for k, e in cfg.items() if k != "sglang_patches" for s in e["candidate_steps"])
    assert args.cuda_graph_bs_decode == [1, 2, 4, 8] and args.speculative_adaptive
    assert args.speculative_num_steps == top and args.speculative_adaptive_config == str(out)
    assert len({tuple(cfg[k]["candidate_steps"]) for k in ("1", "8")}) == 2  # the case it tests


def test_the_fixed_servers_printed_flags_parse(parse, tmp_path, capsys):
    """A batch-1 log: every logged bucket runs s5 alone, so the closing line gives a fixed server's flags."""
    log = write_records(tmp_path / "s5.jsonl", records_from_accepted(
        [3, 5, 1, 0, 5, 2] * 60, 1, 5, draft_ms=1.0, verify_ms=6.0, extend_ms=0.5, gap_ms=0.3))
    assert advise_cli.main([str(log), "--adaptive-config", str(tmp_path / "a.json"), "--baseline-step-ms", "6.5",
                            "--cuda-graph-bs-decode", "1", "2", "4", "8"]) == 0
    line = capsys.readouterr().out.splitlines()[-1]
    flags = line.split("does as well (first lines): ", 1)[1].split(";")[0].split()
    args = parse(["--speculative-algorithm", "EAGLE3", *flags])
    assert (args.speculative_num_steps, args.speculative_eagle_topk, args.speculative_num_draft_tokens) == (5, 1, 6)
    assert not args.speculative_adaptive
