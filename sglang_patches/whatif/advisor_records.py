"""Timing records -> one `Observation` per configuration (the advisor's input; the estimates are in
`advisor_observation.py`).

Each request's cycles in order form its sequence: spans of easy text for the replay, one block
for the bootstrap range. Records with per-request tags (`req`, schema.py) are followed request by
request at any batch size; untagged records (logs written before the tags) only at batch 1.
`observation_from_summary` builds one from the server's rolling stats (no sequences).
"""
from __future__ import annotations

import statistics

from sglang_patches.errors import UserError
from sglang_patches.whatif.advisor_observation import MIN_BS_CYCLES, PREFILL_SLOW_FACTOR, BsCost, Observation, config_label

SPAN_MIN_SHARE = 0.9  # the replay needs this share of request-cycles in followed requests
MAX_BLOCKS = 256      # adjacent blocks are merged above this (bounds the bootstrap's cost)


class ObservationBuilder:
    """Collect decode records (sink-style `add(rec)`) into one Observation per configuration.

    Each request's cycles in order form its sequence (spans for the replay, one block for the
    range). Records with per-request tags (`req`, aligned with `accepted`) are followed request by
    request at any batch size: a tag absent from a later decode record of the same configuration
    has finished (or was retracted: it comes back as a new sequence). Untagged records (logs
    written before the tags) are followed only at batch 1, where the log's order is the request's
    and a prefill record starts the next request."""

    def __init__(self, split: bool = True):
        self.by_config: dict[tuple, dict] = {}
        # One builder per batch size, each fed what the log filtered to that batch size holds (its drafting
        # cycles, every other record): a baseline that prices only some batch sizes is judged on their own
        # acceptance (Observation.by_bs), not the log's pooled over the others.
        self.by_bs: dict[int, ObservationBuilder] | None = {} if split else None
        self.decode_records = 0
        self.prefill_list: list[float] = []  # each prefill's GPU ms (the slow first-use ones are told apart)
        self.finished: dict[tuple, int] = {}  # per configuration, decode cycles whose every request had finished
        self.prefill_records = 0
        self.prefill_ms = 0.0   # GPU time outside steady decode (advise notes its share)
        self.decode_ms = 0.0
        # bs -> GPU ms (cycle + gap) of the log's plain decode steps: a plain server's (step_timing), and a
        # speculative server's steps-0 cycles (`plain` true), which read slower (STEPS0_BIAS)
        self.plain_server: dict[int, list[float]] = {}
        self.plain_spec: dict[int, list[float]] = {}

    def add(self, rec: dict) -> None:
        if self.by_bs is not None:
            if rec["kind"] == "decode" and rec["steps"] != 0:
                child = self.by_bs.get(rec["bs"])
                if child is None:
                    child = self.by_bs[rec["bs"]] = ObservationBuilder(split=False)
                child.add(rec)
            else:
                for child in self.by_bs.values():
                    child.add(rec)
        if rec["kind"] != "decode":
            self.prefill_records += 1
            self.prefill_ms += rec.get("cycle_ms") or 0.0
            if rec.get("cycle_ms") is not None:
                self.prefill_list.append(rec["cycle_ms"])
            self._close_untagged()  # a new request starts (at batch 1)
            return
        self.decode_records += 1
        self.decode_ms += (rec.get("cycle_ms") or 0.0) + (rec.get("gpu_gap_ms") or 0.0)
        if rec["steps"] == 0:  # a plain decode step (steps-0 candidate, step_timing): the log's own baseline
            if rec.get("cycle_ms") is not None:
                into = self.plain_spec if rec.get("plain") else self.plain_server
                into.setdefault(rec["bs"], []).append(rec["cycle_ms"] + (rec.get("gpu_gap_ms") or 0.0))
            self._close_untagged()  # a batch-1 request's chain cycles do not run on across a plain step
            return
        acc = rec["accepted"]
        key = (rec["steps"], rec["topk"], rec["draft_tokens"])
        if not acc:
            self.finished[key] = self.finished.get(key, 0) + 1
            self._close_untagged()  # every request of the batch was stale: it finished
            return
        d = self.by_config.get(key)
        if d is None:
            d = self.by_config[key] = {"hist": [0] * (rec["steps"] + 1), "bs": {}, "over": 0,
                                       "spans": [], "seq_rc": 0, "simulated": 0, "blocks": [],
                                       "block_spans": [], "cur": None, "open": {}}
        if rec.get("simulated"):
            d["simulated"] += 1
        steps, hist = rec["steps"], d["hist"]
        tags = rec.get("req")
        if isinstance(tags, list) and len(tags) == len(acc):
            self._close_untagged()  # a followed batch-1 request (untagged) does not go on here
            opened, live = d["open"], set(tags)
            # a tag twice in one batch (a hash collision, or a client reusing an rid): which cycle
            # is whose is unknown, so neither is followed until the tag is unique again
            twice = {t for t in live if tags.count(t) > 1} if len(live) < len(tags) else set()
            for tag in [t for t in opened if t not in live or t in twice]:  # gone from the batch: ended
                _close_sequence(d, opened.pop(tag))
            for tag, a in zip(tags, acc):
                if tag in twice:
                    continue
                seq = opened.get(tag)
                if seq is None:
                    seq = opened[tag] = _new_sequence(len(hist))
                _extend_sequence(d, seq, a, steps)
        else:
            self._close_tagged(d)  # an untagged cycle in between: the tagged requests skip it
            if rec["bs"] == 1 and len(acc) == 1:
                if d["cur"] is None:
                    d["cur"] = _new_sequence(len(hist))
                _extend_sequence(d, d["cur"], acc[0], steps)
            else:
                self._close_untagged()
        for a in acc:
            if a >= len(hist):
                d["over"] += 1
                a = len(hist) - 1
            hist[a] += 1
        g = d["bs"].get(rec["bs"])
        if g is None:
            g = d["bs"][rec["bs"]] = {"draft": [], "verify": [], "extend": [], "cycle": [], "gap": []}
        for name in ("draft", "verify", "extend", "cycle"):
            v = rec[name + "_ms"]
            if v is not None:
                g[name].append(v)
        gap = rec.get("gpu_gap_ms")
        if gap is not None:
            g["gap"].append(gap)

    @property
    def plain(self) -> dict[int, list[float]]:
        """The baseline's plain decode steps per batch size: a plain server's where the logs have that
        size (the truer one), else a speculative server's steps-0 cycles."""
        return {**self.plain_spec, **self.plain_server}

    @property
    def plain_adaptive(self) -> bool:
        """Some batch size's baseline is a speculative server's steps-0 cycles (STEPS0_BIAS)."""
        return any(bs not in self.plain_server for bs in self.plain_spec)

    def plain_spec_left_out(self) -> str:
        """The note naming the batch sizes where a speculative server's steps-0 cycles were left out
        for a plain server's steps, or ""."""
        both = sorted(set(self.plain_server) & set(self.plain_spec))
        if not both:
            return ""
        m = sum(len(self.plain_spec[bs]) for bs in both)
        return (f"plain decode baseline at batch {', '.join(map(str, both))}: the plain steps there; the adaptive "
                f"server's {m} steps-0 cycles there are left out (they read slower than a plain server's)")

    def _close_untagged(self) -> None:
        """The batch-1 request being followed ended (a prefill, a stale-only or a larger batch)."""
        for d in self.by_config.values():
            if d["cur"] is not None:
                _close_sequence(d, d["cur"])
                d["cur"] = None

    @staticmethod
    def _close_tagged(d: dict) -> None:
        for seq in d["open"].values():
            _close_sequence(d, seq)
        d["open"].clear()

    def _close_all(self) -> None:
        self._close_untagged()
        for d in self.by_config.values():
            self._close_tagged(d)

    def configs(self) -> dict[str, int]:
        return {config_label(*k): sum(d["hist"]) for k, d in self.by_config.items()}

    def observation(self, source: str, config: str | None = None) -> Observation:
        """The one configuration's Observation; UserError (one line) when there is none or a mix."""
        if not self.by_config:
            raise UserError(f"{source}: no decode cycles with accepted counts ({self.prefill_records} prefill, "
                            f"{self.decode_records} decode record(s)): nothing can be predicted; log a run that "
                            "decodes (--timing-log) and pass that file")
        keys = list(self.by_config)
        if config is not None:
            keys = [k for k in keys if config_label(*k) == config]
            if not keys:
                raise UserError(f"--config {config}: not in {source}; it holds {_list_configs(self)}")
        if len(keys) > 1:
            raise UserError(f"{source} mixes configurations ({_list_configs(self)}): a what-if needs one; "
                            f"pass --config NAME to analyse one of them (an adaptive server's log: each saw only the "
                            f"spans SGLang picked it for; --adaptive-config models each batch-size bucket)")
        steps, topk, ndt = keys[0]
        self._close_all()
        d = self.by_config[keys[0]]
        blocks, block_spans = d["blocks"], d["block_spans"]
        if sum(map(sum, blocks)) < SPAN_MIN_SHARE * sum(d["hist"]):
            blocks, block_spans = [], []  # mostly untagged bs > 1: no range (see accept_length_intervals)
        while len(blocks) > MAX_BLOCKS:  # merge neighbours: the bootstrap stays cheap on long logs
            blocks = [[x + y for x, y in zip(blocks[i], blocks[i + 1])] if i + 1 < len(blocks) else blocks[i]
                      for i in range(0, len(blocks), 2)]
            block_spans = [block_spans[i] + (block_spans[i + 1] if i + 1 < len(block_spans) else [])
                           for i in range(0, len(block_spans), 2)]
        if d["over"]:
            raise UserError(f"{source}: {d['over']} request-cycle(s) accepted more drafts than the {steps} steps "
                            "logged; the log is corrupt or not from EAGLE chains; re-log the run")
        costs = []
        for bs, g in sorted(d["bs"].items()):
            if not (g["cycle"] and g["verify"]):
                continue
            med = {k: statistics.median(v) if v else 0.0 for k, v in g.items()}
            costs.append(BsCost(bs, len(g["cycle"]), med["draft"], med["verify"], med["extend"], med["cycle"],
                                med["gap"], gap_known=bool(g["gap"])))
        # A batch size seen in a handful of cycles is the batch ramping up or down between the sizes the
        # traffic holds: its median is one or two cycles, often right after a prefill (a GPU gap of tens of
        # ms). Priced by cycle count, a few of them moved a batch-16 log's answer from 1.45x to 1.06x.
        thin = [c for c in costs if c.cycles < MIN_BS_CYCLES]
        if thin and len(thin) < len(costs):
            costs = [c for c in costs if c.cycles >= MIN_BS_CYCLES]
        else:
            thin = []
        spans = list(d["spans"]) if d["seq_rc"] >= SPAN_MIN_SHARE * sum(d["hist"]) else None
        if d["simulated"]:
            spans = None  # simulated acceptance is drawn per cycle, not a property of the text
        obs = Observation(steps, topk, ndt, list(d["hist"]), costs, spans, simulated=bool(d["simulated"]),
                          blocks=[list(b) for b in blocks],
                          block_spans=[list(b) for b in block_spans] if spans is not None else None,
                          prefill_records=self.prefill_records, prefill_ms=self.prefill_ms, decode_ms=self.decode_ms,
                          plain_steps={bs: (len(v), statistics.median(v)) for bs, v in sorted(self.plain.items())},
                          plain_adaptive=self.plain_adaptive, plain_note=self.plain_spec_left_out(),
                          plain_from_server=bool(self.plain_server),
                          picked_from=tuple(config_label(*k) for k in self.by_config if k != keys[0]),
                          thin_bs=[(c.bs, c.cycles) for c in thin], finished_cycles=self.finished.get(keys[0], 0),
                          prefill_slow=slow_prefills(self.prefill_list))
        if len(costs) > 1 and self.by_bs:
            obs.by_bs = self._by_bs(source, obs.label, [c.bs for c in costs])
        if topk != 1:
            raise UserError(
                f"{source}: topk {topk} ({obs.label}): the log counts accepted drafts along the accepted tree path, "
                "not which branch, so other steps / draft tokens cannot be derived (no exact truncation); "
                f"only the logged configuration is known: accept length {obs.accept_length(steps):.2f}"
                + (f", cycle {_mix_period(obs):.2f} ms" if costs else "")
                + "; re-log at --speculative-eagle-topk 1 for the what-if")
        if not costs:
            raise UserError(f"{source}: decode cycles have no phase times (cycle/verify ms null): the acceptance "
                            f"is known (accept length {obs.accept_length(steps):.2f}) but no cost can be predicted; "
                            "re-log with the timing feature on")
        return obs


    def _by_bs(self, source: str, label: str, sizes) -> dict:
        """{batch size: the Observation of the log filtered to it}, for the batch sizes that have one."""
        out = {}
        for bs in sizes:
            child = self.by_bs.get(bs)
            try:
                out[bs] = child.observation(f"{source} (batch {bs})", label) if child else None
            except UserError:  # e.g. no phase times at that size: it keeps the pooled acceptance
                out[bs] = None
        return {bs: o for bs, o in out.items() if o is not None}


def slow_prefills(ms: list[float]) -> tuple[int, float]:
    """(count, GPU ms) of the prefills over PREFILL_SLOW_FACTOR times the median prefill: a kernel compiled or a
    graph captured at first use (the Kimi fixture's first prefills took 0.8-3.3 s, its others 17-40 ms), which a
    long-running server pays once. Prompt lengths spread prefills too, hence a wide factor; none under 3 prefills."""
    if len(ms) < 3:
        return 0, 0.0
    limit = PREFILL_SLOW_FACTOR * statistics.median(ms)
    slow = [m for m in ms if m > limit]
    return len(slow), sum(slow)


def _new_sequence(width: int) -> dict:
    """One request's cycles in order: `run` full cycles so far, its spans, its histogram (block)."""
    return {"run": 0, "spans": [], "block": [0] * width, "n": 0}


def _extend_sequence(d: dict, seq: dict, a: int, steps: int) -> None:
    """A request's cycles in order: a run of full cycles (a = steps) and the cycle that ends it
    (a < steps) cover one span of E = run x (steps + 1) + a draftable tokens."""
    d["seq_rc"] += 1
    seq["block"][min(a, len(seq["block"]) - 1)] += 1
    seq["n"] += 1
    if a >= steps:
        seq["run"] += 1
    else:
        seq["spans"].append((seq["run"], a))
        seq["run"] = 0


def _close_sequence(d: dict, seq: dict) -> None:
    """The request's sequence ended after `run` full cycles (no closing cycle: a = None); its
    cycles become one block of the bootstrap and its spans join the replay's."""
    if seq["run"]:
        seq["spans"].append((seq["run"], None))
        seq["run"] = 0
    if seq["n"]:
        d["blocks"].append(seq["block"])
        d["block_spans"].append(seq["spans"])
        d["spans"].extend(seq["spans"])


def _list_configs(b: ObservationBuilder) -> str:
    return ", ".join(f"{name} ({n} request-cycles)" for name, n in b.configs().items())


def _mix_period(obs: Observation) -> float:
    n = sum(c.cycles for c in obs.costs)
    return sum(c.cycles * c.period_ms for c in obs.costs) / n


def observation_from_records(records, source: str = "log", config: str | None = None) -> Observation:
    b = ObservationBuilder()
    for rec in records:
        b.add(rec)
    return b.observation(source, config)


def observation_from_summary(summary: dict, steps: int, topk: int, draft_tokens: int) -> Observation | None:
    """An Observation from a `WindowStats.summary()` (the server's rolling stats): one batch size
    (the mean, rounded), p50 costs. None when there is nothing to advise on."""
    hist = list(summary.get("accepted_hist") or [])
    ph = summary.get("phases") or {}
    if not sum(hist) or not (ph.get("cycle") or {}).get("p50") or not (ph.get("verify") or {}).get("p50"):
        return None
    if any(hist[steps + 1:]):
        return None  # more accepted than steps: mixed configurations since the last reset
    hist = (hist + [0] * (steps + 1))[:steps + 1]
    p = {k: (ph.get(k) or {}).get("p50") for k in ("draft", "verify", "extend", "cycle", "gpu_gap")}
    bs = max(1, round(summary.get("mean_bs") or 1))
    cost = BsCost(bs, summary.get("cycles", {}).get("counted", 0), p["draft"] or 0.0, p["verify"],
                  p["extend"] or 0.0, p["cycle"], p["gpu_gap"] or 0.0, gap_known=p["gpu_gap"] is not None)
    return Observation(steps, topk, draft_tokens, hist, [cost])
