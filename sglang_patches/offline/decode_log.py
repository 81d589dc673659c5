"""Plain decode step times from a SGLang server log: the baseline that speculation is compared with.

SGLang logs a 'Decode batch' line every `decode_log_interval` (40) decode steps; its gen throughput
is the tokens generated since the previous line over the whole time since then (idle time,
prefills and batch changes included), filed under the #running-req at the line. Only steady
windows count: the previous decode line of the same rank had the same #running-req and no
'Prefill batch' line of that rank came between. A window that saw a batch end or start reads the
end-of-batch size up to ~50 % fast and a new batch's slow; one that held a prefill reads slow.
Ranks are told apart by the log prefix's tags (`[time DP0 TP0]`: with DP attention each DP rank
logs its own lines). A #running-req needs MIN_STEADY_WINDOWS such windows. Used by `advise`
(--baseline-log, and --calibration's baseline server log), benchmarks/timing_overhead.py (ON/OFF
per speculation cycle from both servers' logs) and the sweep (each row's steady tok/s).
"""
from __future__ import annotations

import datetime
import math
import re
import statistics

from sglang_patches.errors import UserError
from sglang_patches.vocab.bounded_lines import bounded_lines, check_regular
from sglang_patches.vocab.file_kind import not_a_server_log

NUMBER = r"(\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)"   # what Python's float() prints; inf/nan are dropped below
MAX_CYCLE_MS = 3_600_000.0  # an hour per cycle: anything slower is a corrupt line, not a measurement
MIN_CYCLE_MS = 1e-3         # a microsecond: anything faster is one too
MAX_TOKENS_PER_CYCLE = 64.0  # accept len is 1 .. draft tokens + 1; SGLang caps draft tokens far below this
MAX_LINE_BYTES = 64 * 1024   # SGLang's batch lines are ~300 bytes; a longer line is skipped, never held whole
DECODE_LINE = re.compile(r"Decode batch.*?#running-req:\s*(\d+).*?gen throughput \(token/s\):\s*" + NUMBER)
# Tokens per request-cycle in the window, the bonus token included (SGLang's metrics_reporter:
# accepted tokens / (cycles x running requests)).
ACCEPT_LEN = re.compile(r"accept len:\s*" + NUMBER)
RANK_TAGS = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?:\.\d+)?\s*([^\]]*)\]")
MIN_STEADY_WINDOWS = 2


def steady_windows(path: str, what: str = "log", allow_spec: bool = False) -> dict[int, list[float]]:
    """{#running-req: [ms per decode step of each steady window]}, every size kept (may be empty);
    `what` names the input in errors. A speculative server's lines ('accept len') are refused unless
    `allow_spec`: then a "step" is one speculation cycle, n x accept len x 1000 / gen throughput.
    Dividing by the window's own accept length matters: a 40-cycle window's acceptance swings with
    the text it covers (1.4-3.7 on trained-8b at bs 1), and with it tokens per second, while the
    cycle's cost barely moves. Compares like with like only (one configuration, overlay on vs off)."""
    return {n: [ms for ms, _ in v] for n, v in steady_cycles(path, what, allow_spec).items()}


def steady_cycles(path: str, what: str = "log", allow_spec: bool = False, *, start_offset: int = 0,
                  end_offset: int | None = None, between: tuple[datetime.datetime, datetime.datetime] | None = None
                  ) -> dict[int, list[tuple[float, float]]]:
    """{#running-req: [(ms per cycle, tokens per request-cycle) of each steady window]}; see
    steady_windows. Without speculation a cycle is one decode step and yields 1 token. Only the
    log's bytes [start_offset, end_offset) (whole lines), and with `between` only windows whose
    line is stamped inside it (inclusive; the log's clock, 1-s resolution; unstamped lines are
    left out)."""
    steps: dict[int, list[tuple[float, float]]] = {}
    prev: dict[str, int | None] = {}   # per rank: #running-req of its previous decode line, None after a prefill
    try:
        check_regular(path)
        fh = open(path, "rb")
        fh.seek(start_offset)
    except (OSError, ValueError) as err:
        raise UserError(f"{what} {path}: cannot be read ({getattr(err, 'strerror', None) or err}); "
                        "check the path and permissions") from None
    pos = start_offset
    with fh:
        for raw, size in bounded_lines(fh, MAX_LINE_BYTES):
            pos += size
            if end_offset is not None and pos > end_offset:
                break
            # an over-long line reads as empty; after a '\r' (a progress bar) only the last piece is a log line
            line = (raw or b"").decode("utf-8", errors="replace").rsplit("\r", 1)[-1]
            tag = RANK_TAGS.match(line)
            rank = tag.group(2) if tag else ""
            if "Prefill batch" in line:
                prev[rank] = None
                continue
            if "Decode batch" not in line:
                continue
            if "accept len" in line and not allow_spec:
                raise UserError(f"{what} {path}: its decode lines report 'accept len', so that server ran "
                                "speculation; give the log of a server started without --speculative-algorithm")
            m = DECODE_LINE.search(line)
            if not m:   # a decode line without readable numbers: the window cannot span it
                prev[rank] = None
                continue
            n, tput = int(m.group(1)), float(m.group(2))
            acc = ACCEPT_LEN.search(line)
            if acc is None and "accept len" in line:   # a speculative line without a number: no window
                prev[rank] = None
                continue
            tokens_per_cycle = float(acc.group(1)) if acc else 1.0
            ms = n * tokens_per_cycle * 1000.0 / tput if tput > 0 else math.inf
            if not (MIN_CYCLE_MS <= ms < MAX_CYCLE_MS and 1.0 <= tokens_per_cycle <= MAX_TOKENS_PER_CYCLE):
                prev[rank] = None
                continue
            if n == prev.get(rank) and (between is None or _stamped_inside(tag, between)):
                steps.setdefault(n, []).append((ms, tokens_per_cycle))
            prev[rank] = n
    return steps


def _stamped_inside(tag, between) -> bool:
    if not tag:
        return False
    try:
        stamp = datetime.datetime.strptime(tag.group(1), "%Y-%m-%d %H:%M:%S")
    except ValueError:
        return False
    return between[0] <= stamp <= between[1]


def steady_tok_s(path: str, n: int, what: str = "server log", **where) -> dict:
    """Steady decode throughput at #running-req = n from one server's log, speculative or not:
    n x mean tokens per request-cycle x 1000 / median cycle ms over its steady windows. The sweep's
    second reading of a row, free of the prefill, ramp and tail in its end-to-end tok/s (on the
    MoE fixture those made the baseline read 156 tok/s against 257 in steady decode). None with
    fewer than MIN_STEADY_WINDOWS windows. `where`: steady_cycles' start_offset / between."""
    windows = steady_cycles(path, what, allow_spec=True, **where).get(n, [])
    out = {"steady_tok_s": None, "steady_windows": len(windows), "steady_cycle_ms": None}
    if len(windows) >= MIN_STEADY_WINDOWS:
        cycle_ms = statistics.median(ms for ms, _ in windows)
        tokens = statistics.fmean(t for _, t in windows)
        out.update(steady_tok_s=n * tokens * 1000.0 / cycle_ms, steady_cycle_ms=cycle_ms)
    return out


def median_steps(windows: dict[int, list[float]]) -> dict[int, float]:
    """{#running-req: median step ms} over the sizes with at least MIN_STEADY_WINDOWS windows."""
    return {n: statistics.median(v) for n, v in windows.items() if len(v) >= MIN_STEADY_WINDOWS}


def steady_decode_steps(path: str, what: str = "log") -> dict[int, float]:
    """{#running-req: median steady step ms}; a one-line UserError when the log has no usable size."""
    steps = median_steps(steady_windows(path, what))
    refusal = not_a_server_log(path, what) if not steps else None  # a timing log, a chat JSONL, ...
    if refusal:
        raise UserError(refusal)
    if not steps:
        raise UserError(f"{what} {path}: no steady 'Decode batch ... #running-req ... gen throughput' windows "
                        f"(at least {MIN_STEADY_WINDOWS} at one #running-req, each two decode lines in a row at that "
                        "size with no prefill between); give the stdout/stderr log of a SGLang server without "
                        "speculation that decoded for a while")
    return steps
