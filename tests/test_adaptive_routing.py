"""`advise --adaptive-config` routes each logged batch as SGLang does (offline/adaptive_routing.py):
padded to the server's CUDA-graph batch sizes (SGLang's own default list, or --cuda-graph-bs-decode),
then to the largest bucket key at or below it; checked against the real SGLang of each version."""
from __future__ import annotations

import json
import re

import pytest

from advisor_logs import records_from_accepted, write_records
from test_adaptive_config import _runs, cli, loaded, one_line, run, two_bucket_log


def _real_generated_graph_bs(max_bs):
    """SGLang's own default decode CUDA-graph batch sizes of a speculative server, called with the
    two fields it reads (0.5.17: a ServerArgs method; 0.5.23: a function of cuda_graph_hook)."""
    from types import SimpleNamespace

    fields = SimpleNamespace(disable_cuda_graph_padding=False, speculative_algorithm="EAGLE3")
    try:
        from sglang.srt.arg_groups.cuda_graph_hook import generate_decode_cuda_graph_batch_sizes
    except ImportError:
        from sglang.srt.server_args import ServerArgs

        return ServerArgs._generate_decode_cuda_graph_batch_sizes(fields, max_bs)
    return generate_decode_cuda_graph_batch_sizes(fields, max_bs)


@pytest.mark.parametrize("max_bs", [8, 24, 80, 160, 256, 512])
def test_the_default_graph_sizes_are_sglangs(max_bs):
    from sglang_patches.offline.adaptive_routing import spec_cuda_graph_bs

    assert spec_cuda_graph_bs(max_bs) == _real_generated_graph_bs(max_bs)


@pytest.mark.parametrize("graph_bs", [None, [1, 2, 4, 8], [1, 3, 9, 33, 70], "default"])
def test_routing_is_sglangs_own(graph_bs, tmp_path):
    from sglang.srt.speculative.adaptive_spec_params import DEFAULT_ADAPTIVE_CONFIG, AdaptiveSpeculativeParams

    from sglang_patches.offline.adaptive_routing import route, spec_cuda_graph_bs

    sizes = spec_cuda_graph_bs() if graph_bs == "default" else graph_bs
    cfg = {k: {"candidate_steps": [int(k)]} for k in DEFAULT_ADAPTIVE_CONFIG}  # the key names its slot
    path = tmp_path / "route.json"
    path.write_text(json.dumps(cfg))
    params = AdaptiveSpeculativeParams(initial_steps=1, cfg_path=str(path))
    params.set_cuda_graph_bs(sizes)
    keys = sorted(int(k) for k in cfg)
    for bs in range(1, 600):
        assert route(keys, sizes, bs) == params._route(bs).candidate_steps[0], bs


def mixed_bs_log(path):
    """Steps 5 at batch 1 (acceptance 0.8 per position) and batch 5 (0.3: a bucket of lost drafts)."""
    a = records_from_accepted(_runs(400, 0.8, 5, 1), 1, 5, draft_ms=2.0, verify_ms=6.0, extend_ms=1.0, gap_ms=0.3)
    b = records_from_accepted(_runs(1000, 0.3, 5, 2), 5, 5, draft_ms=2.2, verify_ms=9.0, extend_ms=1.4,
                              gap_ms=0.3, start_cycle=len(a))
    return write_records(path, a + b)


def test_a_batch_padded_into_bucket_8_is_priced_there(tmp_path, capsys):
    log = mixed_bs_log(tmp_path / "s5.jsonl")
    # as the server runs with --cuda-graph-bs 1 2 4 8, a batch of 5 runs in bucket 8's steps
    cfg, out = run(tmp_path, "--baseline-step-ms", 4.0, "--cuda-graph-bs", 1, 2, 4, 8, log=log)
    info = {i["bucket"]: i for i in cfg["sglang_patches"]["buckets"]}
    assert info[1]["batch_sizes"] == {"1": 400} and info[8]["batch_sizes"] == {"5": 200}
    assert cfg["8"]["candidate_steps"][0] == 0 and 0 not in cfg["1"]["candidate_steps"]
    assert cfg["sglang_patches"]["cuda_graph_bs"] == [1, 2, 4, 8]
    _, _, params = loaded(out)
    params.set_cuda_graph_bs([1, 2, 4, 8])
    assert params.get_steps_for_batch(5) == 0  # SGLang runs batch 5 unspeculated, as priced
    text = capsys.readouterr().out
    assert re.search(r"bucket 8 \(batch [^)]+\): candidate_steps \[0", text) and "% of the log's decode time" in text
    assert "note: --baseline-step-ms 4 is the plain decode step at every logged batch size (1, 5)" in text
    # SGLang's default sizes capture 5 itself: the same batch stays in bucket 1
    out.unlink()
    cfg, _ = run(tmp_path, "--baseline-step-ms", 6.5, log=log)
    info = {i["bucket"]: i for i in cfg["sglang_patches"]["buckets"]}
    assert set(info[1]["batch_sizes"]) == {"1", "5"} and info[8].get("kept_default") == "not in the log"
    assert any("SGLang's default CUDA-graph batch sizes" in n for n in cfg["sglang_patches"]["notes"])


def test_graph_flags_refused_without_adaptive_config(tmp_path):
    log = two_bucket_log(tmp_path / "s5.jsonl")
    for flags, named in ((["--cuda-graph-bs", 1, 2], "--cuda-graph-bs only applies"),
                         (["--cuda-graph-bs-decode", 1, 2], "--cuda-graph-bs-decode only applies"),
                         (["--disable-cuda-graph"], "--disable-cuda-graph only applies"), (["--force"], "--force only applies"),
                         (["--force", "--disable-cuda-graph"], "--disable-cuda-graph and --force only apply")):
        one_line(cli(log, *flags), named + " with --adaptive-config OUT.json")
    for spelling in ("--cuda-graph-bs", "--cuda-graph-bs-decode"):  # the 0.5.17 alias and the name both versions parse
        one_line(cli(log, "--adaptive-config", tmp_path / "a.json", spelling, 0, 2), "--cuda-graph-bs-decode 0 2: batch sizes must be >= 1")
        one_line(cli(log, spelling, 1, 2), f"{spelling} only applies with --adaptive-config OUT.json")
    assert not (tmp_path / "a.json").exists()
