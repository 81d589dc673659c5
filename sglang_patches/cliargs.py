"""Shared command-line plumbing for every `sglang-patches` subcommand: an argparse parser whose
errors are one-line `UserError`s (exit 2, no usage dump), number types that refuse NaN/Infinity,
and the output-path checks (an output equal to an input, or a place that cannot be written, is
refused before anything is read or written).
"""
from __future__ import annotations

import argparse
import contextlib
import difflib
import math
import os
import re
import sys
from typing import NoReturn

from sglang_patches.errors import UserError


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports a bad flag as one UserError line naming the fix (`--help`)."""

    _argv: list[str] = []

    def __init__(self, *args, sglang_spellings: dict[str, str] | None = None, **kwargs):
        """`sglang_spellings`: SGLang server flags a user may reach for here -> what to use instead."""
        super().__init__(*args, **kwargs)
        self.sglang_spellings = dict(sglang_spellings or {})

    def parse_known_args(self, args=None, namespace=None):
        self._argv = list(sys.argv[1:] if args is None else args)  # for error()'s hint below
        return super().parse_known_args(args, namespace)

    def _flags_in_use(self) -> tuple[list[str], str]:
        """This parser's flags and those of each subcommand named in argv (`fixtures build`), and the
        innermost one's prog: argparse reports a subcommand's unknown flag from the top parser."""
        flags, parser, prog = list(self._option_string_actions), self, self.prog
        while True:
            subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
            parser = next((sp for a in subs for name, sp in a.choices.items() if name in self._argv), None)
            if parser is None:
                return flags, prog
            flags, prog = flags + list(parser._option_string_actions), parser.prog

    def error(self, message: str) -> NoReturn:  # noqa: F821
        # exit_with prints "sglang-patches: error: ..." already: name only the subcommand here
        sub = self.prog.removeprefix("sglang-patches").removeprefix("python -m sglang_patches.").strip()
        m = re.match(r"argument ([\w/-]+): expected one argument$", message)
        if m:  # argparse took a value that starts with '-' (`--patches -checks`) for a flag
            names = m.group(1).split("/")
            follows = [self._argv[i + 1] for i, a in enumerate(self._argv[:-1]) if a in names]
            if any(v.startswith("-") for v in follows):
                message += f"; a value that starts with '-' goes as {names[-1]}=VALUE"
        m = re.match(r"argument ([\w/-]+): invalid \w+ value: '(.+)'$", message)
        action = m and self._option_string_actions.get(m.group(1).split("/")[0])
        if action and action.nargs in ("+", "*") and os.path.isfile(m.group(2)):  # `--cuda-graph-bs-decode 1 8 LOG`
            message += f"; {m.group(2)} is a file: give it before {m.group(1).split('/')[0]}, whose list takes every value after it"
        prog = self.prog
        m = re.match(r"unrecognized arguments: (.+)$", message)
        if m:  # a typo'd flag: name the nearest real one, and the subcommand's own --help
            hints, (known, prog) = [], self._flags_in_use()
            for arg in m.group(1).split():
                flag = arg.split("=", 1)[0]
                if flag in self.sglang_spellings:  # SGLang's own flag for what this command spells otherwise
                    hints.append(f"{flag} is SGLang's server flag: {self.sglang_spellings[flag]}")
                    continue
                near = flag.startswith("--") and difflib.get_close_matches(flag, known, 1, 0.75)
                hints += [f"{flag}: did you mean {near[0]}?"] if near else []
            message += ("; " + "; ".join(hints)) if hints else ""
        raise UserError(f"{sub + ': ' if sub else ''}{message} (see `{prog} --help`)")


def finite_float(text: str) -> float:
    """argparse `type=` for a finite float: 'nan', 'inf' and non-numbers are refused."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def positive_int(text: str) -> int:
    """argparse `type=` for an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not an integer >= 1")
    return value


def _real(path: str | os.PathLike) -> str:
    return os.path.realpath(os.path.expanduser(os.fspath(path)))


def same_path(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """True when a and b name the same file or directory (symlinks and hard links included)."""
    try:
        if os.path.samefile(os.path.expanduser(os.fspath(a)), os.path.expanduser(os.fspath(b))):
            return True
    except OSError:
        pass
    return _real(a) == _real(b)


def refuse_output_on_input(out: str | os.PathLike, out_flag: str, inputs) -> None:
    """UserError when the output `out` is the same file or directory as one of `inputs`
    ([(label, path)], None paths ignored); call it before reading or writing anything."""
    for label, path in inputs:
        if path is None:
            continue
        if same_path(out, path):
            raise UserError(f"{out_flag} {out} is also the input {label} {path}; write the output elsewhere "
                            "(an input is never overwritten)")


def check_dir_creatable(path: str | os.PathLike, flag: str, *, must_exist: bool = False) -> None:
    """Fail fast (UserError) when directory `path` cannot be created or written; creates nothing.

    Walks up to the nearest existing ancestor: a regular file on the way, a read-only ancestor or a
    kernel pseudo file system (/proc, /sys) is named in one line."""
    path = os.path.abspath(os.path.expanduser(os.fspath(path)))
    for pseudo in ("/proc", "/sys"):
        if path == pseudo or path.startswith(pseudo + "/"):
            raise UserError(f"{flag} {path}: under {pseudo}, which holds no regular files; choose a normal directory")
    probe = path
    while not os.path.lexists(probe):
        if must_exist:
            raise UserError(f"{flag}: directory {path} does not exist; create it first")
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    if os.path.lexists(probe) and not os.path.isdir(probe):
        what = "is" if probe == path else f"is below {probe}, which is"
        raise UserError(f"{flag} {path}: {what} not a directory; choose another path")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise UserError(f"{flag} {path}: {probe} is not writable (permission denied); choose another path")


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike):
    """Yield a temporary name next to `path`; on success it replaces `path` in one rename, on any
    error it is removed, so `path` is never left half-written."""
    path = os.fspath(path)
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)
