"""Hand-made fp8_draft_bench case records for the summary's tests (benchmarks/fp8_draft_summary.py): the
GPU runs that write real ones cannot happen on CPU."""
from __future__ import annotations


def trained_case(accept, tps1, tps8, *, t=1.0, bench_accept=None):
    """A trained-8b case: the greedy pass's accept length (SGLang's and the overlay's count), bench_serving's
    output tok/s at concurrency 1 and 8, and its accept length there (`bench_accept`, else `accept`)."""
    served = accept if bench_accept is None else bench_accept
    return {"kind": "trained", "fixture": "trained-8b", "t_end": t, "error": None, "active": True,
            "accept": {"accept_length_sglang": accept, "accept_length_timer": accept},
            "e2e": {"1": {"output_throughput": tps1, "accept_length": served},
                    "8": {"output_throughput": tps8, "accept_length": served}}}
