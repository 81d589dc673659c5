"""The roofline parts of benchmarks/fp8_draft_summary.py: the drafter's weight bytes per draft phase (from its
config.json), the measured copy bandwidth, and bytes / draft time / bandwidth. Pure Python, no GPU."""
from __future__ import annotations

import statistics

SCALE_BYTES = 4  # fp32 per output channel: kernels/fp8_linear.py, and SGLang's Fp8LinearMethod on H200 (cutlass)


def draft_forwards_per_phase(steps: int) -> int:
    """Drafter forwards in one draft phase at --speculative-num-steps S, topk 1: S - 1. SGLang 0.5.17
    speculative/eagle_worker_v2.py, EagleDraftWorker.draft_forward: `for i in range(self.speculative_num_steps)`
    (line 608) breaks at `if i == self.speculative_num_steps - 1: break` (lines 619-621, "we get 1 token from
    draft prefill and (#spec steps - 1) tokens here") before `self.draft_runner.forward` (line 651): the first
    token comes from draft-extend's output, timed as the extend phase. tests/test_fp8_draft_bench.py reads it."""
    return max(int(steps) - 1, 0)


def drafter_matrices(cfg: dict) -> dict[str, tuple[int, int]]:
    """(out, in) of every weight matrix one draft forward reads, from the drafter's config.json. The EAGLE-3
    input layer's qkv_proj reads [embeds, hidden] (2 x hidden wide: models/llama_eagle3.py line 56); fc
    (3 x target hidden -> hidden) runs only on 3H-wide input (line 229: the target's aux states, so in
    draft-extend, not in a draft step; the launcher's FP8 MiB figure counts it); embeddings read bs rows."""
    h, inter = cfg["hidden_size"], cfg["intermediate_size"]
    heads, kv = cfg["num_attention_heads"], cfg.get("num_key_value_heads") or cfg["num_attention_heads"]
    hd = cfg.get("head_dim") or h // heads
    mats = {}
    for layer in range(int(cfg.get("num_hidden_layers") or 1)):
        p = f"layers.{layer}." if cfg.get("num_hidden_layers", 1) > 1 else ""
        mats[p + "qkv"] = ((heads + 2 * kv) * hd, 2 * h if layer == 0 else h)
        mats[p + "o"] = (h, heads * hd)
        mats[p + "gate_up"] = (2 * inter, h)
        mats[p + "down"] = (h, inter)
    mats["lm_head"] = (cfg.get("draft_vocab_size") or cfg["vocab_size"], h)
    return mats


def drafter_weight_bytes(cfg: dict, weights: str, steps: int) -> dict:
    """Weight bytes read per draft forward and per draft phase. bf16: 2 bytes/param; fp8 (--draft-weights
    fp8): 1 byte/param + SCALE_BYTES per output row, lm_head included; sglang_fp8 (SGLang's online FP8):
    linear layers as fp8, lm_head bf16 (its Fp8Config quantizes LinearBase only; ParallelLMHead is not one)."""
    if weights not in ("bf16", "fp8", "sglang_fp8"):
        raise ValueError(f"weights {weights!r}: bf16, fp8 or sglang_fp8")
    per: dict[str, int] = {}
    for name, (n, k) in drafter_matrices(cfg).items():
        fp8 = weights == "fp8" or (weights == "sglang_fp8" and name != "lm_head")
        per[name] = n * k + SCALE_BYTES * n if fp8 else 2 * n * k
    fwd = sum(per.values())
    f = draft_forwards_per_phase(steps)
    return {"weights": weights, "matrices": per, "params": sum(n * k for n, k in drafter_matrices(cfg).values()),
            "bytes_per_forward": fwd, "forwards_per_draft_phase": f, "bytes_per_draft_phase": fwd * f}


def copy_bandwidth(nbytes: int, seconds: list[float]) -> dict:
    """A device-to-device copy of `nbytes` reads and writes nbytes each: 2 x nbytes / median time."""
    med = statistics.median(seconds)
    return {"bytes": nbytes, "repeats": len(seconds), "median_s": med, "bytes_per_s": 2 * nbytes / med,
            "gb_s": round(2 * nbytes / med / 1e9, 1), "times_ms": [round(s * 1e3, 4) for s in seconds]}


def roofline_fraction(nbytes, draft_ms, bytes_per_s):
    """bytes / draft p50 seconds / copy bandwidth (None unless all three are positive numbers)."""
    if not nbytes or not draft_ms or not bytes_per_s:
        return None
    return round(nbytes / (draft_ms / 1e3) / bytes_per_s, 4)
