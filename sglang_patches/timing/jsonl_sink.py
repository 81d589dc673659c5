"""JSONL sink for timing records: bounded buffer, batched whole-line writes, size-capped rotation.

Records are buffered as they come (at most `ring_size`; the oldest are dropped and counted if
writing falls behind) and serialised to complete lines when flushed, off the scheduler's critical
path when the flusher thread runs. The buffer is written in one `write()` per batch, so
a file never ends in a partial line unless the process is killed mid-write; `close()` (atexit)
writes what is left, and a daemon thread flushes every `flush_seconds` so an idle server's last cycles
reach the file even if the process is later killed without running atexit. When the file passes `max_bytes` it is rotated to PATH.1, PATH.2, ...
"""
from __future__ import annotations

import atexit
import collections
import json
import os
import threading
import time


class JsonlSink:
    def __init__(self, path: str, *, max_bytes: int = 256 << 20, backups: int = 3, ring_size: int = 4096,
                 flush_every: int = 64, flush_seconds: float = 1.0, clock=time.monotonic):
        self.path = path
        self.max_bytes, self.backups = max_bytes, backups
        self.flush_every, self.flush_seconds = flush_every, flush_seconds
        self._clock = clock
        self._buf: collections.deque[dict] = collections.deque(maxlen=ring_size)
        self.dropped = 0
        self.written = 0
        parent = os.path.dirname(os.path.abspath(path))
        os.makedirs(parent, exist_ok=True)
        self._fh = open(path, "a", encoding="utf-8")
        self._size = self._fh.tell()
        self._last_flush = clock()
        self._closed = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        if flush_seconds > 0:
            threading.Thread(target=self._flusher, name="sglang_patches-jsonl", daemon=True).start()
        atexit.register(self.close)

    def _flusher(self) -> None:
        while not self._stop.wait(self.flush_seconds):
            self.flush()

    def __call__(self, record: dict) -> None:
        # Called on the scheduler thread: only a deque append. Serialising and writing happen in
        # flush(), which the daemon flusher runs (or this call when there is no flusher thread).
        with self._lock:
            if len(self._buf) == self._buf.maxlen:
                self.dropped += 1
            self._buf.append(record)
            full = len(self._buf) >= self.flush_every and self.flush_seconds <= 0
        if full:
            self.flush()

    def flush(self) -> None:
        with self._lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        if self._closed or not self._buf:
            self._last_flush = self._clock()
            return
        records = list(self._buf)
        self._buf.clear()
        lines = [json.dumps(r, separators=(",", ":")) + "\n" for r in records]
        data = "".join(lines)
        if self._size and self._size + len(data) > self.max_bytes:
            self._rotate()
        self._fh.write(data)
        self._fh.flush()
        self._size += len(data.encode("utf-8"))
        self.written += len(lines)
        self._last_flush = self._clock()

    def _rotate(self) -> None:
        self._fh.close()
        if self.backups > 0:
            for i in range(self.backups - 1, 0, -1):
                src = f"{self.path}.{i}"
                if os.path.exists(src):
                    os.replace(src, f"{self.path}.{i + 1}")
            os.replace(self.path, f"{self.path}.1")
        else:
            os.remove(self.path)
        self._fh = open(self.path, "a", encoding="utf-8")
        self._size = 0

    def close(self) -> None:
        self._stop.set()
        with self._lock:
            if self._closed:
                return
            self._flush_locked()
            self._closed = True
            self._fh.close()


def rank_path(path: str, rank: int, all_ranks: bool) -> str:
    """Rank 0 writes PATH; with all ranks on, rank r > 0 writes PATH with `.rank{r}` before the suffix."""
    if not all_ranks or rank == 0:
        return path
    root, ext = os.path.splitext(path)
    return f"{root}.rank{rank}{ext}"
