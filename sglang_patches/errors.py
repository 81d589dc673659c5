"""User-facing errors: one line, a fix, a non-zero exit code, no traceback.

Raise `UserError("what is wrong; what to do")` anywhere a user's input is at fault. The CLI and the
launcher print it as `sglang-patches: error: ...` and exit with `code` (2 = unusable input).
"""
from __future__ import annotations

import sys
from typing import NoReturn


class UserError(Exception):
    """An error caused by the user's input or environment, reported without a traceback."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.code = code


class PatchTargetError(UserError):
    """A hook target is missing or has changed in the installed SGLang."""


def exit_with(err: UserError, prog: str = "sglang-patches") -> NoReturn:
    one_line = " ".join(str(err).strip().splitlines())  # an embedded newline never splits the message
    print(f"{prog}: error: {one_line}", file=sys.stderr)
    raise SystemExit(err.code)
