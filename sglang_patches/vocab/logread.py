"""Read `--timing-log` JSONL files (one per rank, or several ranks in one file).

Bad lines (not JSON, a truncated last line, another schema version, missing or mistyped fields)
are skipped and counted; a warning names the file, line and reason (the first few per file, then
a count), said once the file has a valid record. A file that cannot be used at all raises `UserError`
(one line, exit code 2, naming its first problem) with no warning lines before it.
"""
from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field

from sglang_patches.errors import UserError
from sglang_patches.vocab.bounded_lines import bounded_lines, check_regular
from sglang_patches.vocab.file_kind import SERVER_LOG_MARKS, TIMING_LOG_FIX, not_a_timing_log
from sglang_patches.vocab.log_open import DAMAGED, damaged, open_log
from sglang_patches.vocab.log_runs import RunTracker
from sglang_patches.vocab.schema import READ_VERSIONS, SCHEMA_NAME, RecordError, validate_record

_READS = f"version {READ_VERSIONS[0]}" if len(READ_VERSIONS) == 1 else \
    f"versions {', '.join(map(str, READ_VERSIONS))}"

MAX_WARNINGS_PER_FILE = 5
MAX_RECORD_BYTES = 1024 * 1024   # a record is under 1 KiB, a few KiB at batch 64 with tags


@dataclass
class FileStats:
    path: str
    valid: int = 0
    skipped: int = 0
    lines: int = 0
    reasons: list = field(default_factory=list)   # (line number, reason) of the first few
    other_versions: dict = field(default_factory=dict)  # version -> number of lines
    ranks: set = field(default_factory=set)
    held: list = field(default_factory=list)  # warnings of the bad lines before the first valid record


TIMING_LOG = "a JSONL file written by --timing-log"


def check_paths(paths, what: str = TIMING_LOG, flag: str = "") -> list[str]:
    """Fail early (UserError) on no paths, missing paths, directories, unreadable files and a file
    given twice (its records would count twice). `what` names the file wanted in the fix, `flag`
    the option it came from."""
    paths = [os.fspath(p) for p in paths]
    if not paths:
        raise UserError(f"no timing log given; pass one or more {TIMING_LOG.replace('a JSONL file', 'JSONL files')}")
    seen: dict[tuple[int, int], str] = {}
    for p in paths:
        name = f"{flag} {p}" if flag else p
        if not os.path.exists(p):
            raise UserError(f"{name}: no such file; pass {what}")
        if os.path.isdir(p):
            raise UserError(f"{name}: is a directory; pass the file(s) inside it"
                            + (f", e.g. {p}/*.jsonl" if what == TIMING_LOG else ""))
        if not os.path.isfile(p):  # a device or FIFO (e.g. /dev/zero) could be read forever
            raise UserError(f"{name}: not a regular file; pass {what}")
        if not os.access(p, os.R_OK):
            raise UserError(f"{name}: permission denied; make the file readable")
        st = os.stat(p)
        if (st.st_dev, st.st_ino) in seen:
            raise UserError(f"{name}: given twice (also as {seen[st.st_dev, st.st_ino]}); pass each log once, "
                            "or its records count twice")
        seen[st.st_dev, st.st_ino] = p
    return paths


def _refuse_server_log(path: str, fh) -> None:
    """A SGLang server's own log passed where a timing log belongs: one line naming both files,
    before reading it line by line (file_kind.py tells it by SGLang's lines with no JSON at the head)."""
    head = fh.read(1 << 18)
    fh.seek(0)
    if SERVER_LOG_MARKS.search(head):
        refusal = not_a_timing_log(path)
        if refusal:
            raise UserError(refusal)


class LogReader:
    """Iterate the valid records of several files; per-file counts in `self.files` afterwards.

    `for rec in LogReader(paths): ...` yields records in file order. UserError is raised for a
    file with no valid record at the point its end is reached (missing files/dirs up front).
    """

    def __init__(self, paths, warn_stream=None, max_warnings: int = MAX_WARNINGS_PER_FILE):
        self.paths = check_paths(paths)
        self.warn_stream = warn_stream
        self.max_warnings = max_warnings
        self.files: list[FileStats] = []
        self.runs = RunTracker()

    @property
    def skipped(self) -> int:
        return sum(f.skipped for f in self.files)

    @property
    def valid(self) -> int:
        return sum(f.valid for f in self.files)

    def _warn(self, msg: str) -> None:
        print(f"sglang-patches: warning: {msg}", file=self.warn_stream or sys.stderr)

    def __iter__(self):
        self.files, self.runs = [], RunTracker()  # a second pass counts afresh
        for path in self.paths:
            yield from self._read_file(path)
        warning = self.runs.check()  # a copy of a log is refused; records of several runs are said once
        if warning:
            self._warn(warning)

    def _read_file(self, path: str):
        st = FileStats(path)
        self.files.append(st)
        try:
            check_regular(path)
            fh = open_log(path)  # gzip and xz read as they are (log_open.py)
        except OSError as err:
            raise UserError(f"{path}: cannot open ({err.strerror or err})") from None
        with fh:
            try:
                _refuse_server_log(path, fh)
                for lineno, (raw, _) in enumerate(bounded_lines(fh, MAX_RECORD_BYTES), 1):
                    if raw is None:
                        st.lines += 1
                        self._skip(st, lineno, f"line longer than {MAX_RECORD_BYTES // 1024} KiB, not a timing record")
                        continue
                    rec = self._parse(st, lineno, raw)
                    if rec is not None:
                        yield rec
            except DAMAGED as err:
                raise damaged(path, err) from None
        self._finish(st)

    def _parse(self, st: FileStats, lineno: int, raw: bytes):
        text = raw.decode("utf-8", "replace").strip()
        if not text:
            return None
        st.lines += 1
        try:
            obj = json.loads(text)
        except RecursionError:
            self._skip(st, lineno, "JSON nested too deeply")
            return None
        except ValueError:
            truncated = not raw.endswith(b"\n")  # only the last line can lack it
            self._skip(st, lineno, "truncated last line (was the log still being written?)"
                       if truncated else "not valid JSON")
            return None
        if isinstance(obj, dict) and obj.get("schema") == SCHEMA_NAME and (obj.get("v") not in READ_VERSIONS
                                                                          or isinstance(obj.get("v"), bool)):
            v = obj.get("v")
            st.other_versions[repr(v)] = st.other_versions.get(repr(v), 0) + 1
            self._skip(st, lineno, f"schema version {v!r} (this tool reads {_READS})")
            return None
        try:
            rec = validate_record(obj)
        except RecordError as err:
            self._skip(st, lineno, str(err))
            return None
        st.valid += 1
        st.ranks.add(rec["rank"])
        self.runs.add(st.path, rec)
        if st.valid == 1:  # the file is usable: its earlier bad lines are worth a warning now
            for msg in st.held:
                self._warn(msg)
            st.held.clear()
        return rec

    def _skip(self, st: FileStats, lineno: int, reason: str) -> None:
        st.skipped += 1
        if len(st.reasons) < self.max_warnings:
            st.reasons.append((lineno, reason))
            msg = f"{st.path}:{lineno}: skipped: {reason}"
            if st.valid:
                self._warn(msg)
            else:
                st.held.append(msg)

    def _finish(self, st: FileStats) -> None:
        hidden = st.skipped - len(st.reasons)
        if hidden > 0 and st.valid:
            self._warn(f"{st.path}: {hidden} more bad line(s) not shown ({st.skipped} skipped in all)")
        if st.valid:
            return
        if st.lines == 0:
            raise UserError(f"{st.path}: file is empty; was the server started with --timing-log "
                            "and did it run any speculative cycles?")
        if st.other_versions and sum(st.other_versions.values()) == st.skipped:
            found = ", ".join(sorted(st.other_versions))
            raise UserError(f"{st.path}: every record has schema version {found}, but this tool "
                            f"reads {_READS}; use the sglang-patches release "
                            "that wrote the log")
        refusal = not_a_timing_log(st.path)  # a chat JSONL, bench_serving's results, one JSON document, ...
        if refusal:
            raise UserError(refusal)
        first = f"; first problem: line {st.reasons[0][0]}: {st.reasons[0][1]}" if st.reasons else ""
        raise UserError(f"{st.path}: no valid timing records in {st.lines} line(s){first}; {TIMING_LOG_FIX}")


def read_records(paths, warn_stream=None) -> tuple[list[dict], LogReader]:
    """All valid records of `paths` as a list, plus the reader (for its per-file counts)."""
    reader = LogReader(paths, warn_stream=warn_stream)
    return list(reader), reader
