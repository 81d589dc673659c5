"""Reading log files line by line without trusting them: a line longer than a limit is skipped
(its bytes still counted), so a newline-free multi-GB file streams in limit-sized pieces instead
of being held whole; a path that is not a regular file (a FIFO would block, /dev/zero never
ends) is refused before it is opened."""
from __future__ import annotations

import os


def check_regular(path: str) -> None:
    """OSError unless `path` is missing (open() reports that) or a regular file."""
    if os.path.exists(path) and not os.path.isfile(path):
        raise OSError("not a regular file")


def bounded_lines(fh, limit: int):
    """(line, bytes consumed) of a binary file; an over-long line comes back as None."""
    while True:
        raw = fh.readline(limit)
        if not raw:
            return
        if raw.endswith(b"\n") or len(raw) < limit:
            yield raw, len(raw)
            continue
        size = len(raw)
        while raw and not raw.endswith(b"\n"):   # skip the rest of the over-long line
            raw = fh.readline(limit)
            size += len(raw)
        yield None, size
