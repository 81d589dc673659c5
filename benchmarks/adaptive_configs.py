"""Adaptive configs as the benchmark's servers run them: SGLang's own loader, each bucket's candidate
steps, the bucket a batch is routed to, and the steps an adaptive server must start at."""
from __future__ import annotations

import json

GRAPH_BS = (1, 2, 4, 8)  # the CUDA-graph batch sizes adaptive_bench's servers capture (--cuda-graph-bs)


def load_adaptive_config(path: str | None) -> dict:
    """The config as SGLang reads it (its own loader; None = its built-in default)."""
    from sglang.srt.speculative.adaptive_spec_params import _load_adaptive_config

    cfg, _ = _load_adaptive_config(path)
    return json.loads(json.dumps(cfg))


def buckets(cfg: dict) -> dict[int, list[int]]:
    return {int(k): sorted(set(v["candidate_steps"])) for k, v in cfg.items() if k.isdigit()}


def candidates_for_bs(cfg: dict, bs: int, graph_bs=GRAPH_BS) -> list[int]:
    """Candidate steps of the bucket SGLang routes a batch of `bs` to: padded up to the next CUDA-graph
    batch size (unchanged past the largest), then the largest bucket key <= that (else the smallest)."""
    table = buckets(cfg)
    padded = next((g for g in sorted(graph_bs) if g >= bs), bs)
    keys = sorted(table)
    below = [k for k in keys if k <= padded]
    return table[below[-1] if below else keys[0]]


def initial_steps(cfg: dict) -> int:
    """--speculative-num-steps for an adaptive server: the largest positive candidate. SGLang (0.5.17)
    sets --speculative-num-draft-tokens to steps + 1 and sizes the shared logits buffer of its CUDA
    graphs from that starting state; a candidate above it then fails at start ("shared logits buffer
    holds 32 rows but caller needs 64", seen on the H200 with its built-in config started at steps 3).
    SGLang refuses 0 steps at launch, so a config without positive candidates is refused here."""
    steps = sorted({s for c in buckets(cfg).values() for s in c})
    positive = [s for s in steps if s > 0]
    if not positive:
        raise ValueError("adaptive config has no positive candidate steps; serve it without speculation instead")
    return positive[-1]
