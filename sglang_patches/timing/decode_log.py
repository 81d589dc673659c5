"""Plain decode step times from a SGLang server log: the baseline that speculation is compared with.

SGLang logs a 'Decode batch' line every `decode_log_interval` (40) decode steps; its gen throughput
is the tokens generated since the previous line over the whole time since then (idle time,
prefills and batch changes included), filed under the #running-req at the line. Only steady
windows count: the previous decode line had the same #running-req and no 'Prefill batch' line came
between. A window that saw a batch end or start reads the end-of-batch size up to ~50 % fast and
a new batch's slow; one that held a prefill reads slow. A #running-req needs MIN_STEADY_WINDOWS
such windows. Used by `advise` (--baseline-log, --calibration) and the sweep report.
"""
from __future__ import annotations

import re
import statistics

from sglang_patches.errors import UserError

DECODE_LINE = re.compile(r"Decode batch.*?#running-req:\s*(\d+).*?gen throughput \(token/s\):\s*([0-9.]+)")
MIN_STEADY_WINDOWS = 2


def steady_windows(path: str, what: str = "log") -> dict[int, list[float]]:
    """{#running-req: [step ms of each steady window]} (may be empty); `what` names the input in errors."""
    steps: dict[int, list[float]] = {}
    prev_n = None            # #running-req of the previous decode line, None after a prefill
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if "Prefill batch" in line:
                prev_n = None
                continue
            if "Decode batch" not in line:
                continue
            if "accept len" in line:
                raise UserError(f"{what} {path}: its decode lines report 'accept len', so that server ran "
                                "speculation; give the log of a server started without --speculative-algorithm")
            m = DECODE_LINE.search(line)
            if not m:
                continue
            n, tput = int(m.group(1)), float(m.group(2))
            if n > 0 and tput > 0 and n == prev_n:
                steps.setdefault(n, []).append(n * 1000.0 / tput)
            prev_n = n
    return {n: v for n, v in steps.items() if len(v) >= MIN_STEADY_WINDOWS}


def steady_decode_steps(path: str, what: str = "log") -> dict[int, float]:
    """{#running-req: median steady step ms}; a one-line UserError when the log has no steady window."""
    steps = steady_windows(path, what)
    if not steps:
        raise UserError(f"{what} {path}: no steady 'Decode batch ... #running-req ... gen throughput' windows "
                        "(two decode lines in a row at the same #running-req, no prefill between); give the "
                        "stdout/stderr log of a SGLang server without speculation that decoded for a while")
    return {n: statistics.median(v) for n, v in steps.items()}
