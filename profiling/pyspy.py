"""Run `py-spy record` against a scheduler process for the profiling window.

One py-spy process per scheduler pid, `--format speedscope` only: py-spy writes one format per
run, and two concurrent py-spy processes cannot both stop (ptrace) the same process for a
consistent sample. The flamegraph SVG is rendered from the same speedscope samples (flamegraph.py),
so the SVG and the top-function table describe exactly the same samples.

py-spy runs in its own session (Ctrl-C in the terminal reaches only us); it is stopped with SIGINT,
on which it writes its file, with `--duration` as a safety cap in case we die first.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time

from sglang_patches.errors import UserError

INSTALL_HINT = ("install it with `pip install py-spy` (a static binary wheel; from the source tree, "
                "`pip install -e '.[profile]'`) into an environment on PATH, or pass --no-py-spy")
PTRACE_HINT = ("py-spy was denied access to pid {pid} (ptrace): run it as the server's user or as root "
               "(`sudo env \"PATH=$PATH\" sglang-patches profile ...`); in docker start the container with "
               "`--cap-add SYS_PTRACE`; or allow it with `sysctl kernel.yama.ptrace_scope=0`")


def find_py_spy(explicit: str | None = None) -> str:
    """Path of the py-spy binary (from PATH unless `explicit`), or a one-line UserError."""
    path = shutil.which(explicit or "py-spy")
    if path is None:
        where = f"{explicit!r} is not an executable" if explicit else "py-spy is not on PATH"
        raise UserError(f"{where}; {INSTALL_HINT}")
    return path


def build_command(py_spy: str, pid: int, out_file: str, *, rate: int = 100, duration_s: int | None = None,
                  native: bool = False, idle: bool = False) -> list[str]:
    cmd = [py_spy, "record", "--pid", str(pid), "--rate", str(int(rate)), "--format", "speedscope",
           "--output", out_file]
    if duration_s is not None:
        cmd += ["--duration", str(int(duration_s))]
    if native:
        cmd.append("--native")
    if idle:
        cmd.append("--idle")
    return cmd


def display_command(cmd: list[str]) -> str:
    """The command with the per-process parts replaced: for the summary header."""
    shown, skip = [], {"--pid": "PID", "--output": "OUT/pyspy/scheduler-RANK-pidPID.speedscope.json"}
    for i, arg in enumerate(cmd[1:], 1):
        shown.append(skip[cmd[i - 1]] if cmd[i - 1] in skip else arg)
    return "py-spy " + " ".join(shown)


def classify_failure(stderr: str, pid: int) -> str:
    """One-line reason for a failed py-spy run, with the fix where we know it."""
    low = stderr.lower()
    if "permission denied" in low or "operation not permitted" in low or "os error 1)" in low:
        return PTRACE_HINT.format(pid=pid)
    if "failed to get process executable" in low or "no such process" in low or "os error 3)" in low:
        return f"py-spy: process {pid} is gone (the scheduler exited?)"
    for line in stderr.splitlines():  # first meaningful line, without py-spy's progress chatter
        line = line.strip()
        if line and not line.startswith("py-spy>") and not line.startswith("Stack backtrace"):
            return f"py-spy failed on pid {pid}: {line[:200]}"
    return f"py-spy failed on pid {pid} (no message)"


class Recording:
    """One running `py-spy record` process; `stop()` returns (ok, message)."""

    def __init__(self, cmd: list[str], pid: int, out_file: str, log_file: str):
        self.cmd, self.pid, self.out_file, self.log_file = cmd, pid, out_file, log_file
        self._log = open(log_file, "w")
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        self.started = time.time()
        self.result: tuple[bool, str] | None = None
        self.recorded_s: float | None = None

    def running(self) -> bool:
        return self.proc.poll() is None

    def log_text(self) -> str:
        try:
            with open(self.log_file, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def stop(self, timeout: float = 60.0) -> tuple[bool, str]:
        if self.result is not None:
            return self.result
        if self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGINT)  # py-spy writes its output on SIGINT
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        self.recorded_s = time.time() - self.started
        rc = self.proc.returncode
        have = os.path.exists(self.out_file) and os.path.getsize(self.out_file) > 0
        if have:
            self.result = (True, f"py-spy recorded pid {self.pid} ({self.recorded_s:.1f} s)")
        else:
            self.result = (False, classify_failure(self.log_text(), self.pid) if rc not in (None, 0)
                           else f"py-spy wrote no samples for pid {self.pid} (see {self.log_file})")
        return self.result
