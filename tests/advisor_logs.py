"""Timing logs for the advisor and alarm tests.

No per-cycle timing JSONL is committed (size; `benchmarks/results/README.md`), but every recorded
sweep row keeps what a log is summarised into: its decode cycle count, per-position acceptance
P(accepted > k), phase p50s and the measured tok/s. `log_from_sweep_row` writes a log whose
acceptance histogram reproduces the row's pos_rates exactly (up to rounding to whole
request-cycles, in a seeded random order) and whose phase times are the row's p50s; its GPU gap is
the one the row's measured tok/s implies (period = bs x accept length / tok/s, minus the cycle).

`chain_log` is the synthetic generator for the exactness test: each request-cycle draws its full
run of acceptable drafts L (unbounded), the log keeps min(L, steps), and the generator also returns
the L values, so the truth for fewer steps is computed from the generator, not from the log.
"""
from __future__ import annotations

import json
import random
import sys
from pathlib import Path

from sglang_patches.vocab.schema import make_record

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
SWEEP_8B = RESULTS / "2026-11-29-sweep-8b-sim33"
SWEEP_TRAINED = RESULTS / "2026-11-29-sweep-trained-grid" / "grid"
BACKEND_8B = RESULTS / "2026-11-29-draft-kernels" / "backend_check_8b.json"


def sweep_rows(sweep_dir: Path) -> list[dict]:
    return [json.loads(line) for line in open(sweep_dir / "results.jsonl") if line.strip()]


def sweep_row(sweep_dir: Path, config: str, bs: int) -> dict:
    return next(r for r in sweep_rows(sweep_dir) if r["config"] == config and r["batch_size"] == bs)


def hist_from_pos_rates(pos_rates: list[float], n: int) -> list[int]:
    """hist[a] (a = 0..len(pos_rates)) with sum n and P(accepted > k) = pos_rates[k] up to 1/n."""
    above = [n] + [round(p * n) for p in pos_rates] + [0]
    return [max(above[a] - above[a + 1], 0) for a in range(len(pos_rates) + 1)]


def write_records(path: Path, records: list[dict]) -> Path:
    """Write records through the server's own JsonlSink, so a log here is byte-for-byte what a
    server writes (compact JSON): readers that assumed another spacing failed on GPU logs once."""
    from sglang_patches.server.timing.jsonl_sink import JsonlSink

    if Path(path).exists():
        Path(path).unlink()  # the sink appends
    sink = JsonlSink(str(path), flush_seconds=0, ring_size=max(len(records), 1))
    for r in records:
        sink(r)
    sink.close()
    import atexit

    atexit.unregister(sink.close)  # closed already; do not pile up exit hooks over the suite
    return path


def records_from_accepted(accepted: list[int], bs: int, steps: int, *, topk: int = 1, draft_tokens=None,
                          draft_ms=0.5, verify_ms=5.0, extend_ms=0.4, cycle_ms=None, gap_ms=0.2,
                          jitter=0.0, seed=0, start_cycle=0, simulated=False) -> list[dict]:
    rng = random.Random(seed)
    ndt = steps + 1 if draft_tokens is None else draft_tokens
    out = []
    for i in range(0, len(accepted), bs):
        chunk = accepted[i:i + bs]
        j = (lambda v: v * (1 + rng.uniform(-jitter, jitter)))
        d, v, e = j(draft_ms), j(verify_ms), j(extend_ms)
        c = (d + v + e) * 1.01 if cycle_ms is None else j(cycle_ms)
        out.append(make_record(cycle=start_cycle + len(out), t=1.7e9 + 0.01 * len(out), rank=0, kind="decode",
                               bs=len(chunk), steps=steps, topk=topk, draft_tokens=ndt, accepted=chunk,
                               draft_ms=d, verify_ms=v, extend_ms=e, cycle_ms=c, host_gap_ms=0.1,
                               gpu_gap_ms=j(gap_ms) if gap_ms is not None else None, simulated=simulated))
    return out


def log_from_sweep_row(row: dict, path: Path, seed: int = 0, cycles: int | None = None,
                       simulated: bool | None = None) -> Path:
    """A timing log with the row's acceptance (per cycle, shuffled) and phase medians. `simulated`:
    None marks the records as the recorder would (the row ran under SGLANG_SIMULATE_ACC_LEN)."""
    bs, spec = int(row["batch_size"]), row["spec"]
    n_cycles = cycles or int(row["cycles"])
    hist = hist_from_pos_rates(row["pos_rates"], n_cycles * bs)
    accepted = [a for a, n in enumerate(hist) for _ in range(n)]
    random.Random(seed).shuffle(accepted)
    p = row["phases_p50_ms"]
    accept_len = sum((a + 1) * n for a, n in enumerate(hist)) / sum(hist)
    period = bs * accept_len * 1000.0 / row["tok_s"]
    gap = max(period - p["cycle"], 0.0)
    # the row's acceptance was simulated (SGLANG_SIMULATE_ACC_LEN): the recorder marks such records
    if simulated is None:
        simulated = bool(row.get("simulate_acc_len") or (row.get("env") or {}).get("SGLANG_SIMULATE_ACC_LEN"))
    recs = records_from_accepted(accepted, bs, spec["steps"], topk=spec["topk"], draft_tokens=spec["draft_tokens"],
                                 draft_ms=p["draft"], verify_ms=p["verify"], extend_ms=p["extend"],
                                 cycle_ms=p["cycle"], gap_ms=gap, jitter=0.05, seed=seed, simulated=simulated)
    return write_records(path, recs)


def chain_log(path: Path, steps: int, rates: list[float], request_cycles: int, bs: int = 1, seed: int = 0):
    """Write a steps-`steps` log of chains whose draft k is accepted with conditional rate rates[k]
    (the last repeating); return the per-request-cycle full run lengths L (capped at 64)."""
    rng = random.Random(seed)
    runs = []
    for _ in range(request_cycles):
        length = 0
        while length < 64 and rng.random() < rates[min(length, len(rates) - 1)]:
            length += 1
        runs.append(length)
    write_records(path, records_from_accepted([min(L, steps) for L in runs], bs, steps, jitter=0.02, seed=seed))
    return runs


def chain_accept_length_for_test(rate: float, steps: int) -> float:
    """Expected accept length of a constant-rate chain: 1 + r + ... + r^steps."""
    return sum(rate ** k for k in range(steps + 1))


def token_model_runs(steps: int, requests: int = 20, tokens: int = 1500, p_stay_easy: float = 0.88,
                     p_leave_hard: float = 0.6, seed: int = 0):
    """Text as a Markov chain of draftable (easy) / hard tokens; a chain of `steps` accepts the
    draftable tokens ahead of it, up to `steps`, and the target adds the next one (the bonus).
    Returns (per request: the draftable flags, and a function running a chain over them)."""
    rng = random.Random(seed)
    texts = []
    for _ in range(requests):
        easy, flags = True, []
        for _ in range(tokens):
            easy = rng.random() < (p_stay_easy if easy else p_leave_hard)
            flags.append(easy)
        texts.append(flags)

    def run(flags, k):
        out, p = [], 0
        while p < len(flags):
            a = 0
            while a < k and p + a < len(flags) and flags[p + a]:
                a += 1
            out.append(a)
            p += a + 1
        return out

    return texts, run


def token_model_log(path: Path, steps: int, **kw) -> dict:
    """A batch-1 log of the token model at `steps` (a prefill record before every request) and the
    true accept length of every chain length 1..steps + 3, from running those chains."""
    texts, run = token_model_runs(steps, **kw)
    recs = []
    for flags in texts:
        recs.append(make_record(cycle=len(recs), t=1.7e9, rank=0, kind="prefill", bs=1, steps=steps, topk=1,
                                draft_tokens=steps + 1, accepted=[], draft_ms=None, verify_ms=None,
                                extend_ms=0.3, cycle_ms=2.0, host_gap_ms=None))
        recs += records_from_accepted(run(flags, steps), 1, steps, start_cycle=len(recs))
    write_records(path, recs)
    truth = {}
    for k in range(1, steps + 4):
        cycles = [run(f, k) for f in texts]
        truth[k] = sum(a + 1 for c in cycles for a in c) / sum(len(c) for c in cycles)
    return truth


def main(argv: list[str]) -> int:
    """`python tests/advisor_logs.py OUT.jsonl`: docs/tour.md's example log (the H200 `trained-8b` grid's
    steps-5 row at batch 1, held-out stdlib prompts), for trying `report` and `advise` without a GPU."""
    if len(argv) != 1 or argv[0].startswith("-"):
        print("usage: python tests/advisor_logs.py OUT.jsonl", file=sys.stderr)
        return 2
    out = Path(argv[0])
    if out.exists():
        print(f"advisor_logs: {out} already exists; give a new file name", file=sys.stderr)
        return 2
    if not out.parent.is_dir():
        print(f"advisor_logs: directory {out.parent} does not exist; create it first", file=sys.stderr)
        return 2
    log_from_sweep_row(sweep_row(RESULTS / "2026-12-01-trained-8b" / "grid", "s5_k1_n6", 1), out)
    print(f"wrote {out}: try `sglang-patches report {out}` and `sglang-patches advise {out} --baseline-step-ms 4.67`")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
