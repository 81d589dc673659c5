"""Cheap, stdlib-only aggregation of per-cycle timing records (see `schema.py`).

`WindowStats` runs inside the server (a periodic log line) and inside `sglang-patches report`.
`add()` costs O(batch size): phase times go into bounded rings (percentiles over the last
`ring` counted cycles), everything else into whole-window counters (means, shares, acceptance).

Definitions (all over the records whose `kind` is in `kinds`, decode only by default; records of
other kinds are only counted in `cycles`):
  * phase p50/p90/p99: linear interpolation (numpy's default) over the ring, null values skipped;
    phase mean: over the whole window, null values skipped.
  * phase share: sum(phase_ms) / sum(cycle_ms) over the steady cycles that have a cycle_ms (a null
    phase counts as 0). So the `cycle` share is 1.0 and host_gap's share is host time between
    cycles relative to GPU cycle time. Steady: cycle_ms at most about SLOW_CYCLE_FACTOR times the
    median decode cycle of its batch size (other kinds always count); the slow ones (warm-up, CUDA
    graph capture, a kernel compiled at first use) are counted in `slow_cycles`, and `share_all` keeps
    every cycle. The median comes from a histogram of cycle_ms in BINS_PER_OCTAVE log bins per batch
    size (O(1) per record), so the cut lies between 3x and about 3.5x the median. The gap shares also
    leave out idle waits: a decode cycle whose GPU gap (host gap where the record has none) exceeds both
    IDLE_GAP_MIN_MS and IDLE_GAP_FACTOR times its own cycle, or any other kind's (a prefill, long itself,
    is what a wait for a request comes before) over IDLE_GAP_MIN_MS: the GPU waited for requests (or a
    host stall that long), not the per-cycle overhead the share measures; `idle_waits` counts those before
    steady cycles (a wait before a slow cycle leaves the shares with that cycle, counted in `slow_cycles`).
  * accept length: mean over request-cycles of accepted + 1 (the bonus token).
  * pos_rates[k]: share of request-cycles with accepted > k among those that drafted position k
    (steps > k: all of them at one steps value; in a mixed-steps window a short chain is no miss
    past its end). vLLM's per-position rate; not conditional: that is pos_rates[k] / pos_rates[k-1].
  * tok_s_per_request: accept_length / mean steady cycle seconds; tok_s_batch: the tokens produced
    (sum of accepted + 1) in steady cycles / their cycle seconds (tok_s_batch_all: every cycle's);
    cycles_per_s: (n - 1) / (last t - first t).
"""
from __future__ import annotations

import math
from collections import deque

from sglang_patches.vocab.schema import KINDS

SERIES = ("draft", "verify", "extend", "cycle", "host_gap", "gpu_gap")
PERCENTILES = (50, 90, 99)
DEFAULT_RING = 4096
SLOW_CYCLE_FACTOR = 3.0
BINS_PER_OCTAVE = 8
IDLE_GAP_MIN_MS = 20.0  # a gap between cycles above this (and above IDLE_GAP_FACTOR decode cycles) is a wait for work
IDLE_GAP_FACTOR = 3.0
GAPS = ("host_gap", "gpu_gap")


def percentile(sorted_values, q: float):
    """q-th percentile (0..100) of an already sorted sequence, linear interpolation; None if empty."""
    n = len(sorted_values)
    if n == 0:
        return None
    pos = (n - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, n - 1)
    frac = pos - lo
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * frac


def _div(a, b):
    return a / b if b else None


class WindowStats:
    """Incremental aggregator of timing records; see the module docstring for definitions."""

    def __init__(self, ring: int = DEFAULT_RING, kinds=("decode",)):
        if ring < 1:
            raise ValueError("ring must be >= 1")
        unknown = set(kinds) - set(KINDS)
        if unknown:
            raise ValueError(f"unknown kinds {sorted(unknown)}; choose from {KINDS}")
        self.ring = int(ring)
        self.kinds = tuple(kinds)
        self.reset()

    def reset(self) -> None:
        self.n_by_kind = {k: 0 for k in KINDS}
        self.counted = 0
        self.first_t = None
        self.last_t = None
        self._rings = {s: deque(maxlen=self.ring) for s in SERIES}
        self._sum = {s: 0.0 for s in SERIES}       # over all non-null values
        self._n = {s: 0 for s in SERIES}           # number of non-null values
        self._share_sum = {s: 0.0 for s in SERIES}  # over cycles with a cycle_ms
        self._cycle_sum = 0.0                       # sum of cycle_ms where present
        # decode: (bs, log2 bin of cycle_ms) -> [cycles, ms sum, series sums, tokens, idle waits, their ms]
        self._bins: dict[tuple, list] = {}
        self._unbinned = [0, 0.0, {s: 0.0 for s in SERIES}, 0, 0, 0.0]  # other kinds (a prefill is long, never 'slow')
        self._bs_sum = 0
        self._cycle_ms_by_bs = {}                   # batch size -> sum of cycle_ms (where present)
        self._request_cycles = 0
        self._accepted_sum = 0
        self._hist: list[int] = []                  # _hist[a] = request-cycles with accepted == a
        self._max_positions = 0                     # max steps seen (positions drafted)
        self._rc_by_steps: dict[int, int] = {}      # request-cycles per steps value: who reached position k
        self.simulated = 0                          # counted records of a simulated-acceptance run
        self._tokens_timed = 0                      # tokens produced in cycles with a cycle_ms

    def add(self, record: dict) -> None:
        kind = record["kind"]
        self.n_by_kind[kind] = self.n_by_kind.get(kind, 0) + 1
        if kind not in self.kinds:
            return
        self.counted += 1
        if record.get("simulated"):
            self.simulated += 1
        t = record["t"]
        if self.first_t is None or t < self.first_t:
            self.first_t = t
        if self.last_t is None or t > self.last_t:
            self.last_t = t
        cycle_ms = record["cycle_ms"]
        bin_sums = None if cycle_ms is None else self._bin(record["bs"], cycle_ms) if kind == "decode" else self._unbinned
        if bin_sums is not None:
            bin_sums[0] += 1
            bin_sums[1] += cycle_ms
        gap = record.get("gpu_gap_ms")
        gap = record.get("host_gap_ms") if gap is None else gap
        wait = (cycle_ms is not None and gap is not None and gap > IDLE_GAP_MIN_MS
                and (kind != "decode" or gap > IDLE_GAP_FACTOR * cycle_ms))
        if wait:  # kept with the cycle's bin: a wait before a slow cycle goes out with it, counted once
            bin_sums[4] += 1
            bin_sums[5] += gap
        for s in SERIES:
            v = record.get(s + "_ms")  # gpu_gap_ms is optional within schema v1
            if v is None:
                continue
            self._rings[s].append(v)
            self._sum[s] += v
            self._n[s] += 1
            if cycle_ms is not None:
                self._share_sum[s] += v
                if not (wait and s in GAPS):
                    bin_sums[2][s] += v
        if cycle_ms is not None:
            self._cycle_sum += cycle_ms
            self._cycle_ms_by_bs[record["bs"]] = self._cycle_ms_by_bs.get(record["bs"], 0.0) + cycle_ms
        self._bs_sum += record["bs"]
        accepted = record["accepted"]
        if accepted:
            hist = self._hist
            tokens = 0
            for a in accepted:
                if a >= len(hist):
                    hist.extend([0] * (a + 1 - len(hist)))
                hist[a] += 1
                tokens += a + 1
            self._request_cycles += len(accepted)
            self._rc_by_steps[record["steps"]] = self._rc_by_steps.get(record["steps"], 0) + len(accepted)
            self._accepted_sum += tokens - len(accepted)
            if cycle_ms is not None:
                self._tokens_timed += tokens
                bin_sums[3] += tokens
        if kind == "decode" and record["steps"] > self._max_positions:
            self._max_positions = record["steps"]

    def _bin(self, bs: int, cycle_ms: float) -> list:
        key = (bs, math.floor(math.log2(cycle_ms) * BINS_PER_OCTAVE) if cycle_ms > 0 else None)
        entry = self._bins.get(key)
        if entry is None:
            entry = self._bins[key] = [0, 0.0, {s: 0.0 for s in SERIES}, 0, 0, 0.0]
        return entry

    def _steady(self):
        """(per-series sums and cycle_ms sum over the steady cycles, the slow cycles' summary). Each batch size
        is held against its own median cycle: a bs-64 cycle three times a bs-1 one is traffic, not warm-up."""
        limits = {}  # bs -> the lower bin edge above which a cycle is slow (None: no cut)
        for bs in {k[0] for k in self._bins}:
            keys = sorted(b for k, b in self._bins if k == bs and b is not None)
            total = sum(self._bins[(bs, b)][0] for b in keys) + self._bins.get((bs, None), [0])[0]
            seen, limit = self._bins.get((bs, None), [0])[0], None  # zero-ms cycles sort first
            for b in keys:
                seen += self._bins[(bs, b)][0]
                if 2 * seen >= total:  # the median's bin: its upper edge times the factor
                    limit = SLOW_CYCLE_FACTOR * 2 ** ((b + 1) / BINS_PER_OCTAVE)
                    break
            limits[bs] = limit
        sums, cycle_sum, slow_n, slow_ms = {s: 0.0 for s in SERIES}, 0.0, 0, 0.0
        steady_n = steady_tokens = idle_n = 0
        idle_ms = 0.0
        slow_by_bs: dict = {}
        for key, (n, ms, series, tokens, waits, wait_ms) in [*self._bins.items(), (None, self._unbinned)]:
            limit = None if key is None or key[1] is None else limits[key[0]]
            if limit is not None and 2 ** (key[1] / BINS_PER_OCTAVE) > limit:
                slow_n, slow_ms = slow_n + n, slow_ms + ms
                slow_by_bs[key[0]] = slow_by_bs.get(key[0], 0.0) + ms
                continue
            cycle_sum += ms
            steady_n, steady_tokens = steady_n + n, steady_tokens + tokens
            idle_n, idle_ms = idle_n + waits, idle_ms + wait_ms
            for s in SERIES:
                sums[s] += series[s]
        return sums, cycle_sum, {"n": slow_n, "ms": slow_ms, "factor": SLOW_CYCLE_FACTOR,
                                 "steady_cycles": steady_n, "steady_tokens": steady_tokens, "by_bs": slow_by_bs,
                                 "idle": (idle_n, idle_ms)}

    def add_many(self, records) -> "WindowStats":
        for r in records:
            self.add(r)
        return self

    def summary(self) -> dict:
        phases = {}
        steady_sums, steady_cycle_sum, slow = self._steady()
        for s in SERIES:
            vals = sorted(self._rings[s])
            entry = {f"p{q}": percentile(vals, q) for q in PERCENTILES}
            entry["mean"] = _div(self._sum[s], self._n[s])
            entry["share"] = _div(steady_sums[s], steady_cycle_sum) if self._n[s] else None
            entry["share_all"] = _div(self._share_sum[s], self._cycle_sum) if self._n[s] else None
            entry["n"] = self._n[s]
            phases[s] = entry

        rc = self._request_cycles
        n_pos = max(self._max_positions, len(self._hist) - 1, 0)
        pos_counts = []
        running = rc  # request-cycles with accepted > k, built from the tail of the histogram
        for k in range(n_pos):
            running -= self._hist[k] if k < len(self._hist) else 0
            pos_counts.append(running)
        # position k over the request-cycles that drafted it (steps > k): a mixed-steps window (adaptive)
        # must not count a steps-3 cycle as a miss at position 4; one steps value: rc throughout
        reach = [sum(n for st, n in self._rc_by_steps.items() if st > k) for k in range(n_pos)]
        pos_rates = [c / r if r else None for c, r in zip(pos_counts, reach)]
        hist = list(self._hist) + [0] * (n_pos + 1 - len(self._hist))
        accept_length = _div(self._accepted_sum + rc, rc)

        steady_n, steady_tokens = slow.pop("steady_cycles"), slow.pop("steady_tokens")
        slow_by_bs = slow.pop("by_bs")
        idle_n, idle_ms = slow.pop("idle")  # the waits before steady cycles: the ones the gap shares leave out
        # per batch size, as the phase shares: the slow cycles (one 1 s warm-up cycle at batch 1 read as a
        # third of a batch-16 run's time) left out
        steady_by_bs = {b: v - slow_by_bs.get(b, 0.0) for b, v in self._cycle_ms_by_bs.items()}
        steady_by_bs_sum = sum(steady_by_bs.values())
        mean_cycle_ms = _div(steady_cycle_sum, steady_n)  # the steady cycles, as the shares
        tok_s_req = (accept_length / (mean_cycle_ms / 1000.0)
                     if accept_length is not None and mean_cycle_ms else None)
        tok_s_batch = _div(steady_tokens, steady_cycle_sum / 1000.0) if steady_cycle_sum else None
        tok_s_all = _div(self._tokens_timed, self._cycle_sum / 1000.0) if self._cycle_sum else None
        seconds = (self.last_t - self.first_t) if self.first_t is not None else None
        cps = _div(self.counted - 1, seconds) if seconds and self.counted > 1 else None
        return {
            "kinds": list(self.kinds),
            "window": {"first_t": self.first_t, "last_t": self.last_t, "seconds": seconds},
            "cycles": {"decode": self.n_by_kind.get("decode", 0),
                       "prefill": self.n_by_kind.get("prefill", 0),
                       "counted": self.counted,
                       "in_ring": len(self._rings["cycle"])},
            "ring": self.ring,
            "phases": phases,
            "slow_cycles": slow,
            "idle_waits": {"n": idle_n, "ms": idle_ms, "min_ms": IDLE_GAP_MIN_MS,
                           "factor": IDLE_GAP_FACTOR},
            "mean_bs": _div(self._bs_sum, self.counted),
            # share of steady GPU cycle time per batch size, largest first: a short run's ramp and drain
            # (requests finish apart when their acceptance differs) show as time below its top batch
            "cycle_time_by_bs": {str(b): v / steady_by_bs_sum for b, v in sorted(
                steady_by_bs.items(), key=lambda kv: -kv[1]) if v > 1e-9} if steady_by_bs_sum > 0 else {},
            "request_cycles": rc,
            "accept_length": accept_length,
            "accepted_hist": hist,
            "pos_counts": pos_counts,
            "pos_rates": pos_rates,
            "tok_s_per_request": tok_s_req,
            "tok_s_batch": tok_s_batch,
            "tok_s_batch_all": tok_s_all,
            "cycles_per_s": cps,
            "simulated_records": self.simulated,
        }


def summarize(records, ring: int = DEFAULT_RING, kinds=("decode",)) -> dict:
    """Summary of an iterable of records in one call."""
    return WindowStats(ring=ring, kinds=kinds).add_many(records).summary()


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def _num(x, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def format_summary_line(summary: dict, max_positions: int = 8) -> str:
    """One log line, e.g. `spec timing: 512 cycles 41.2 cyc/s | of cycle: draft 21% verify 63%
    extend 14% | between cycles, vs cycle (overlapping): host gap 2% gpu gap 1% | accept len 2.84
    | pos acc 0.81 0.62 0.44`. The phases are parts of the cycle; the gaps lie outside it (idle waits
    for requests left out: the module docstring)."""
    ph = summary["phases"]
    rates = summary["pos_rates"][:max_positions]
    pos = " ".join(_num(r, ".2f") for r in rates) or "-"
    return (f"spec timing: {summary['cycles']['counted']} cycles "
            f"{_num(summary['cycles_per_s'], '.1f')} cyc/s | "
            f"of cycle: draft {_pct(ph['draft']['share'])} verify {_pct(ph['verify']['share'])} "
            f"extend {_pct(ph['extend']['share'])} | between cycles, vs cycle (overlapping): "
            f"host gap {_pct(ph['host_gap']['share'])} gpu gap {_pct(ph['gpu_gap']['share'])} | "
            f"accept len {_num(summary['accept_length'], '.2f')} | pos acc {pos}")
