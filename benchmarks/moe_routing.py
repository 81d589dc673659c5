"""Expert routing for benchmarks/verify_cost.py: SGLang's uniform-routing switch, an MoE config's expert
shape, and the distinct experts a verify's tokens reach under that switch (computed, not measured)."""
from __future__ import annotations

import json


def routing_env(routing: str) -> dict:
    """Server environment for --routing: `uniform` sets SGLang's own switch (compat UNIFORM_EXPERTS_ENV):
    each token's top_k experts are spaced n_experts // top_k apart from a random offset, so the tokens of
    a verify spread over the experts independently; `model` leaves the fixture's (dummy) router in charge."""
    if routing == "model":
        return {}
    from sglang_patches.compat import current

    return {current().UNIFORM_EXPERTS_ENV.name: "1"}


def moe_shape(config: dict) -> tuple[int, int] | None:
    """(routed experts, experts per token) of a target config.json, None for a dense model."""
    experts = config.get("n_routed_experts") or config.get("num_experts")
    top_k = config.get("num_experts_per_tok")
    return (int(experts), int(top_k)) if experts and top_k else None


def distinct_experts_uniform(experts: int, top_k: int, tokens: int) -> float | None:
    """Expected distinct experts one MoE layer reads for `tokens` tokens under SGLang's uniform rule: a
    token takes {o + j * (E // k) mod E, j < k} for a random offset o, so its set is fixed by o mod
    (E // k) when k divides E: k experts per class, E // k classes, tokens land in classes independently.
    The bound is min(k x tokens, E). None when k does not divide E (classes overlap: no closed form here)."""
    step = max(experts // top_k, 1)
    if step * top_k != experts:
        return None
    return min(top_k * step * (1 - (1 - 1 / step) ** tokens), float(min(top_k * tokens, experts)))


def moe_meta(paths: dict, draft_tokens: list[int], routing: str) -> dict:
    """Per MoE fixture: experts, top_k, layers, and (uniform routing) the expected distinct experts per
    layer of one verify at bs 1 for each T, against the k x T bound: computed from SGLang's rule, not
    measured (hence `expected_`)."""
    out = {}
    for f, p in paths.items():
        cfg = json.loads((p.target / "config.json").read_text())
        shape = moe_shape(cfg)
        if shape is None:
            continue
        e, k = shape
        tokens = sorted({1, *draft_tokens})
        out[f] = {"experts": e, "top_k": k, "layers": cfg.get("num_hidden_layers"),
                  "expected_distinct_experts_per_layer_bs1": (
                      {str(t): (None if (d := distinct_experts_uniform(e, k, t)) is None else round(d, 2)) for t in tokens}
                      if routing == "uniform" else None),
                  "bound_k_times_T": {str(t): min(k * t, e) for t in tokens}}
    return out
