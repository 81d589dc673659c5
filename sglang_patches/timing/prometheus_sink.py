"""Prometheus export of timing records, on SGLang's own /metrics (needs --enable-metrics).

SGLang runs prometheus_client in multiprocess mode (PROMETHEUS_MULTIPROC_DIR set by the server), so
metrics created in a scheduler process appear on the HTTP server's /metrics. Names:

- `sglang_patches:spec_phase_seconds{phase=draft|verify|extend|cycle|prefill_extend, tp_rank}`
  histogram of GPU seconds per cycle.
- `sglang_patches:spec_num_drafts_total{tp_rank}`: request-cycles that proposed drafts.
- `sglang_patches:spec_num_accepted_tokens_per_pos_total{position=k, tp_rank}`: vLLM's conditional
  convention: position k counts when drafts 0..k were all accepted. Per-position rate (PromQL):
  `rate(..._per_pos_total{position="k"}[1m]) / rate(sglang_patches:spec_num_drafts_total[1m])`.
- `sglang_patches:spec_num_accepted_tokens_total{tp_rank}`: mean accept length =
  1 + rate(accepted_tokens_total) / rate(num_drafts_total).
Every series also carries `simulated="true"` when the server runs with simulated acceptance
(`--simulate-acceptance`: accept counts drawn from configured rates, not measured), else "false".
"""
from __future__ import annotations

BUCKETS = (0.0001, 0.00025, 0.0005, 0.00075, 0.001, 0.0015, 0.002, 0.003, 0.004, 0.005, 0.0075,
           0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1, 0.25, 0.5, 1.0)


class PrometheusSink:
    def __init__(self, rank: int, max_positions: int = 16, simulated: bool = False, registry=None):
        from prometheus_client import REGISTRY, Counter, Histogram

        reg = {"registry": REGISTRY if registry is None else registry}

        self.rank = str(rank)
        self.simulated = "true" if simulated else "false"
        sim = self.simulated
        self.phase = Histogram("sglang_patches:spec_phase_seconds",
                               "GPU seconds per speculation cycle phase (CUDA events)",
                               ["phase", "tp_rank", "simulated"], buckets=BUCKETS, **reg)
        self.drafts = Counter("sglang_patches:spec_num_drafts", "Request-cycles with drafts", ["tp_rank", "simulated"], **reg)
        self.accepted = Counter("sglang_patches:spec_num_accepted_tokens",
                                "Accepted draft tokens (bonus token excluded)", ["tp_rank", "simulated"], **reg)
        self.per_pos = Counter("sglang_patches:spec_num_accepted_tokens_per_pos",
                               "Accepted drafts at position k given 0..k-1 accepted", ["position", "tp_rank", "simulated"], **reg)
        self._phase_children = {name: self.phase.labels(name, self.rank, sim)
                                for name in ("draft", "verify", "extend", "cycle", "prefill_extend")}
        self._pos_children = [self.per_pos.labels(str(k), self.rank, sim) for k in range(max_positions)]
        self._drafts = self.drafts.labels(self.rank, sim)
        self._accepted = self.accepted.labels(self.rank, sim)

    def __call__(self, rec: dict) -> None:
        if rec["kind"] == "prefill":
            if rec["extend_ms"] is not None:
                self._phase_children["prefill_extend"].observe(rec["extend_ms"] / 1e3)
            return
        for name in ("draft", "verify", "extend", "cycle"):
            value = rec[f"{name}_ms"]
            if value is not None:
                self._phase_children[name].observe(value / 1e3)
        accepted = rec["accepted"]
        if not accepted:
            return
        self._drafts.inc(len(accepted))
        self._accepted.inc(sum(accepted))
        counts = [0] * min(max(accepted), len(self._pos_children))
        for a in accepted:
            for k in range(min(a, len(counts))):
                counts[k] += 1
        for k, c in enumerate(counts):
            if c:
                self._pos_children[k].inc(c)
