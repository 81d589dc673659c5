"""JSONL sink for timing records: bounded buffer, batched whole-line writes, size-capped rotation.

Two locks keep the scheduler thread off the disk:
- `_lock` guards only the append buffer. The scheduler thread's call holds it for one deque append;
  a flush holds it for one swap of the full buffer with an empty spare. Nothing else runs under it.
- `_io_lock` serialises flushes (and close): encoding the swapped-out records to JSON lines, the
  `write()`, the `flush()` and rotation all run under it and outside `_lock`, so a slow or stalled
  disk delays only the flusher thread, never an append.
The buffer holds at most `ring_size` records; if writing falls behind the oldest are dropped and
counted. A batch is written in one `write()` of whole lines, so a file never ends in a partial line
unless the process is killed mid-write. A daemon thread flushes every `flush_seconds` (an idle
server's last cycles reach the file even if the process is later killed without atexit) and
`close()` (atexit) writes what is left. With `flush_seconds <= 0` there is no thread and the append
that fills `flush_every` records flushes inline (used by tests and offline tools). When the file
passes `max_bytes` it is rotated to PATH.1, PATH.2, ...
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
        self._buf: collections.deque[dict] = collections.deque(maxlen=ring_size)    # appends go here
        self._spare: collections.deque[dict] = collections.deque(maxlen=ring_size)  # owned by the flusher
        self.dropped = 0
        self.written = 0
        parent = os.path.dirname(os.path.abspath(path))
        os.makedirs(parent, exist_ok=True)
        self._fh = open(path, "a", encoding="utf-8")
        self._size = self._fh.tell()
        self._last_flush = clock()
        self._closed = False
        self._lock = threading.Lock()     # the append buffer only
        self._io_lock = threading.Lock()  # encoding, writing, rotating, closing
        self._stop = threading.Event()
        if flush_seconds > 0:
            threading.Thread(target=self._flusher, name="sglang_patches-jsonl", daemon=True).start()
        atexit.register(self.close)

    def _flusher(self) -> None:
        while not self._stop.wait(self.flush_seconds):
            self.flush()

    def __call__(self, record: dict) -> None:
        # The scheduler thread: one deque append under the buffer lock, which a flush holds only
        # for a swap. Without a flusher thread the append that fills a batch flushes inline.
        with self._lock:
            buf = self._buf
            if len(buf) == buf.maxlen:
                self.dropped += 1
            buf.append(record)
            full = self.flush_seconds <= 0 and len(buf) >= self.flush_every
        if full:
            self.flush()

    def flush(self) -> None:
        with self._io_lock:
            self._flush_io_locked()

    def _flush_io_locked(self) -> None:
        if self._closed:
            return
        with self._lock:  # the only moment an append can wait on a flush: one swap
            batch, self._buf = self._buf, self._spare
        try:
            if batch:
                data = "".join([json.dumps(r, separators=(",", ":")) + "\n" for r in batch])
                if self._size and self._size + len(data) > self.max_bytes:
                    self._rotate()
                self._fh.write(data)
                self._fh.flush()
                self._size += len(data.encode("utf-8"))
                self.written += len(batch)
        finally:
            batch.clear()
            self._spare = batch
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
        with self._io_lock:
            if self._closed:
                return
            self._flush_io_locked()
            self._closed = True
            self._fh.close()


def rank_path(path: str, rank: int, all_ranks: bool) -> str:
    """Rank 0 writes PATH; with all ranks on, rank r > 0 writes PATH with `.rank{r}` before the suffix."""
    if not all_ranks or rank == 0:
        return path
    root, ext = os.path.splitext(path)
    return f"{root}.rank{rank}{ext}"
