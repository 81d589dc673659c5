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
Every series carries `steps` (the draft steps the cycle ran: SGLang's `--speculative-adaptive`
switches them at runtime; "0" is a plain decode step of the speculative server, whose phases are
observed but which adds no drafts), and `simulated="true"` when the server runs with simulated acceptance
(`--simulate-acceptance`: accept counts drawn from configured rates, not measured), else "false".
"""
from __future__ import annotations

BUCKETS = (0.0001, 0.00025, 0.0005, 0.00075, 0.001, 0.0015, 0.002, 0.003, 0.004, 0.005, 0.0075,
           0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1, 0.25, 0.5, 1.0)


class PrometheusSink:
    def __init__(self, rank: int, max_positions: int = 16, simulated: bool = False, registry=None,
                 steps_values=(0,)):
        from prometheus_client import REGISTRY, Counter, Histogram

        reg = {"registry": REGISTRY if registry is None else registry}

        self.rank = str(rank)
        self.simulated = "true" if simulated else "false"
        self.phase = Histogram("sglang_patches:spec_phase_seconds",
                               "GPU seconds per speculation cycle phase (CUDA events)",
                               ["phase", "tp_rank", "simulated", "steps"], buckets=BUCKETS, **reg)
        self.drafts = Counter("sglang_patches:spec_num_drafts", "Request-cycles with drafts",
                              ["tp_rank", "simulated", "steps"], **reg)
        self.accepted = Counter("sglang_patches:spec_num_accepted_tokens",
                                "Accepted draft tokens (bonus token excluded)", ["tp_rank", "simulated", "steps"], **reg)
        self.per_pos = Counter("sglang_patches:spec_num_accepted_tokens_per_pos",
                               "Accepted drafts at position k given 0..k-1 accepted",
                               ["position", "tp_rank", "simulated", "steps"], **reg)
        # positions: enough for the largest steps value the server can run
        self.max_positions = max([max_positions, *steps_values])
        self._children: dict[int, tuple] = {}
        for steps in steps_values:  # created once, at start; another steps value once when first seen
            self._children_for(steps)

    def _children_for(self, steps: int) -> tuple:
        ch = self._children.get(steps)
        if ch is None:
            r, sim, st = self.rank, self.simulated, str(steps)
            phases = {name: self.phase.labels(name, r, sim, st)
                      for name in ("draft", "verify", "extend", "cycle", "prefill_extend")}
            pos = [self.per_pos.labels(str(k), r, sim, st) for k in range(self.max_positions)]
            ch = self._children[steps] = (phases, pos, self.drafts.labels(r, sim, st), self.accepted.labels(r, sim, st))
        return ch

    def __call__(self, rec: dict) -> None:
        phases, pos_children, drafts, accepted_counter = self._children_for(rec["steps"])
        if rec["kind"] == "prefill":
            if rec["extend_ms"] is not None:
                phases["prefill_extend"].observe(rec["extend_ms"] / 1e3)
            return
        for name in ("draft", "verify", "extend", "cycle"):
            value = rec[f"{name}_ms"]
            if value is not None:
                phases[name].observe(value / 1e3)
        accepted = rec["accepted"]
        if not accepted or rec.get("plain"):
            return
        drafts.inc(len(accepted))
        accepted_counter.inc(sum(accepted))
        counts = [0] * min(max(accepted), len(pos_children))
        for a in accepted:
            for k in range(min(a, len(counts))):
                counts[k] += 1
        for k, c in enumerate(counts):
            if c:
                pos_children[k].inc(c)
