"""Open a timing log for reading, plain or compressed: rotated logs are often gzip- or xz-compressed (logrotate's
`compress`; the results folders keep `.jsonl.xz`), and Python's standard library reads both, so a user need not
decompress first. zstd has no reader there: file_kind refuses it with its fix. A damaged or cut-short archive is
one UserError naming the file (`damaged`). A SGLang server's own log (--baseline-log) is still read uncompressed
(offline/decode_log.py), and file_kind refuses a compressed one with its fix."""
from __future__ import annotations

import gzip
import lzma
import zlib

from sglang_patches.errors import UserError

MAGIC = {b"\x1f\x8b": "gzip", b"\xfd7zXZ\x00": "xz"}
FIX = {"gzip": "is gzip-compressed: gunzip it first", "xz": "is xz-compressed: unxz it first (xz -dk keeps the .xz)"}
DAMAGED = (EOFError, lzma.LZMAError, zlib.error, gzip.BadGzipFile)  # what reading a broken archive raises


def compression(path) -> str | None:
    """'gzip' or 'xz' by the file's first bytes, else None (OSError propagates)."""
    with open(path, "rb") as fh:
        head = fh.read(6)
    return next((name for magic, name in MAGIC.items() if head.startswith(magic)), None)


def open_log(path):
    """A binary file object of the log's bytes, decompressed where gzip or xz."""
    kind = compression(path)
    return gzip.open(path, "rb") if kind == "gzip" else lzma.open(path, "rb") if kind == "xz" else open(path, "rb")


def damaged(path, err: BaseException) -> UserError:
    return UserError(f"{path}: the compressed log is damaged or cut short ({type(err).__name__}: {str(err)[:80]}); "
                     "decompress what it holds (zcat or xzcat it into a file) and pass that")
