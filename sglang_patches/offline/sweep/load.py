"""A bounded closed-loop load generator over SGLang's native /generate API (stdlib only).

`run_batch(url, prompts, batch_size, max_new_tokens)` keeps `batch_size` requests in flight
(greedy unless `temperature` > 0; by default ignore_eos so every request produces exactly max_new_tokens) and measures
end-to-end output tokens per second, per request and aggregate, plus SGLang's per-request spec
metadata and a short hash of each output text (to compare outputs across servers without keeping
them). `offset` picks where in the prompt list the run starts (the sweep moves it on every repeat,
so repeats measure different prompts and every configuration sees the same ones).
"""
from __future__ import annotations

import concurrent.futures as cf
import hashlib
import statistics
import time

from sglang_patches.httpjson import http_json


def generate(url: str, prompt: str, max_new_tokens: int, timeout: float = 600.0, ignore_eos: bool = True,
             temperature: float = 0.0) -> dict:
    t0 = time.perf_counter()
    out = http_json(url + "/generate", {
        "text": prompt,
        "sampling_params": {"max_new_tokens": max_new_tokens, "temperature": temperature, "ignore_eos": ignore_eos},
    }, timeout=timeout)
    elapsed = time.perf_counter() - t0
    meta = out.get("meta_info", {})
    return {"elapsed_s": elapsed, "completion_tokens": meta.get("completion_tokens", 0),
            "spec_verify_ct": meta.get("spec_verify_ct"), "spec_accept_length": meta.get("spec_accept_length"),
            "e2e_latency": meta.get("e2e_latency"),
            "text_sha1": hashlib.sha1(str(out.get("text", "")).encode()).hexdigest()[:12]}


def pick_prompts(prompts: list[str], n: int, offset: int = 0) -> list[str]:
    return [prompts[(offset + i) % len(prompts)] for i in range(n)]


def run_batch(url: str, prompts: list[str], batch_size: int, max_new_tokens: int,
              num_requests: int | None = None, timeout: float = 600.0, *, offset: int = 0,
              ignore_eos: bool = True, temperature: float = 0.0) -> dict:
    """Send `num_requests` (default: batch_size) requests with `batch_size` in flight, prompts
    `offset`, `offset + 1`, ... (wrapping around).

    `timeout` bounds each request (seconds); a request that times out raises."""
    n = num_requests or batch_size
    chosen = pick_prompts(prompts, n, offset)
    t0 = time.perf_counter()
    with cf.ThreadPoolExecutor(max_workers=batch_size) as pool:
        results = list(pool.map(lambda p: generate(url, p, max_new_tokens, timeout, ignore_eos, temperature), chosen))
    wall = time.perf_counter() - t0
    tokens = sum(r["completion_tokens"] for r in results)
    per_req = [r["completion_tokens"] / r["elapsed_s"] for r in results if r["elapsed_s"] > 0]
    accept = [r["spec_accept_length"] for r in results if r["spec_accept_length"]]
    return {"batch_size": batch_size, "requests": n, "max_new_tokens": max_new_tokens, "wall_s": wall,
            "output_tokens": tokens, "tok_s": tokens / wall if wall > 0 else 0.0,
            "tok_s_per_request": statistics.median(per_req) if per_req else 0.0,
            "accept_length": statistics.mean(accept) if accept else None,
            "verify_ct": sum(r["spec_verify_ct"] or 0 for r in results),
            "text_hashes": [r["text_sha1"] for r in results]}
