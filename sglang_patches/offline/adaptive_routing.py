"""How SGLang routes a decode batch to a bucket of its `--speculative-adaptive-config`, copied from
AdaptiveSpeculativeParams (speculative/adaptive_spec_params.py, 0.5.17 and 0.5.23 alike) so that
`advise --adaptive-config` prices each logged batch where SGLang runs it; tests/test_adaptive_config.py
holds these copies to the real ones of each supported version.
"""
from __future__ import annotations

import bisect

from sglang_patches.errors import UserError


def bucket_of(keys: list[int], bs: int) -> int:
    """SGLang's AdaptiveSpeculativeParams._find_closest_bs: the largest key <= bs, else the
    smallest key."""
    i = bisect.bisect_right(keys, bs) - 1
    return keys[max(0, i)]


def padded(graph_bs: list[int] | None, bs: int) -> int:
    """SGLang's AdaptiveSpeculativeParams._pad_to_cuda_graph_bs: the smallest captured batch size
    >= bs; bs itself above the largest (run eagerly) or without CUDA graphs."""
    if not graph_bs:
        return bs
    i = bisect.bisect_left(graph_bs, bs)
    return graph_bs[i] if i < len(graph_bs) else bs


def route(keys: list[int], graph_bs: list[int] | None, bs: int) -> int:
    """The bucket whose candidate steps SGLang runs a batch of bs requests with."""
    return bucket_of(keys, padded(graph_bs, bs))


def spec_cuda_graph_bs(max_bs: int = 512) -> list[int]:
    """SGLang's decode CUDA-graph batch sizes for a speculative server without --cuda-graph-bs
    (ServerArgs._generate_decode_cuda_graph_batch_sizes in 0.5.17, cuda_graph_hook's
    generate_decode_cuda_graph_batch_sizes in 0.5.23; a test compares the two with this copy).
    max_bs depends on the GPU's memory; routing into buckets up to 64 does not, unless it is < 64."""
    sizes = [*range(1, 9), *range(10, 33, 2), *range(40, 65, 4), *range(72, 257, 8), *range(272, max_bs + 1, 16)]
    sizes = [b for b in sizes if b <= max_bs]
    return sizes if max_bs in sizes else sizes + [max_bs]


def batch_sizes_of(keys: list[int], graph_bs: list[int] | None, key: int, up_to: int = 64) -> str:
    """The batch sizes up to `up_to` that SGLang routes to bucket `key`, as "1-4" (or "none")."""
    sizes = [b for b in range(1, up_to + 1) if route(keys, graph_bs, b) == key]
    return "none" if not sizes else f"{sizes[0]}" if len(sizes) == 1 else f"{sizes[0]}-{sizes[-1]}"


def bucket_spans(keys: list[int], graph_bs: list[int] | None) -> dict:
    """{bucket: the batch sizes SGLang routes to it} as "8-30"; the last bucket takes every larger batch too."""
    spans = {k: batch_sizes_of(keys, graph_bs, k) for k in keys}
    if keys and spans[keys[-1]] != "none":
        spans[keys[-1]] = spans[keys[-1]].split("-")[0] + " and up"
    return spans


def graph_batch_sizes(args) -> tuple[list[int] | None, str]:
    """(the server's decode CUDA-graph batch sizes, how they were known)."""
    if args.disable_cuda_graph:
        return None, "none (--disable-cuda-graph), so batches are not padded"
    if args.cuda_graph_bs:
        if min(args.cuda_graph_bs) < 1:
            raise UserError(f"--cuda-graph-bs-decode {' '.join(map(str, args.cuda_graph_bs))}: batch sizes must be >= 1")
        return sorted(set(args.cuda_graph_bs)), "those of --cuda-graph-bs-decode"
    return spec_cuda_graph_bs(), ("SGLang's default CUDA-graph batch sizes for speculative decoding "
                                  "(1-8, 10-32 by 2, 40-64 by 4, ...); pass --cuda-graph-bs-decode as the "
                                  "server has them if it sets its own")
