"""A scheduler process asking the drop-in launcher to stop the server on purpose.

Two reasons, each with its own signal and exit code:

- `--on-accept-collapse exit` must stop the whole server from inside a scheduler process. SGLang's
  own route for that is SIGQUIT to the HTTP-serving process, whose handler treats it as a crash: in
  0.5.17 it dumps py-spy stacks, asks for CUDA coredumps and sleeps
  `SGLANG_CUDA_COREDUMP_BEFORE_CRASH_WAIT_SECS` (default 60 s) before it kills the process tree. A
  deliberate stop is not a crash, so the drop-in launcher installs a handler for STOP_SIGNAL that
  kills the tree at once and exits with EXIT_STOPPED. Schedulers under a plain `sglang serve`
  (the opt-in plugin) have no such handler and still use SIGQUIT.
- The in-server hidden-state check (`HIDDEN-STATE MISMATCH` at model load). Raised inside
  Scheduler.__init__, it reaches SGLang's `run_scheduler_process` (0.5.17 and 0.5.23 alike), which logs
  the traceback and sends SIGQUIT to its parent; there the launch-phase handler kills the whole tree,
  the launcher included (exit 137). Under the drop-in launcher the scheduler instead leaves the message
  in the file STOP_REASON_ENV names (written to a private name, then renamed: the launcher never reads
  half of it; every rank may write, each the whole message), sends MISMATCH_SIGNAL to the launcher and
  waits to be killed. The launcher's handler prints the message as one line, kills the tree and exits
  EXIT_MISMATCH. The file is written once, at model load, never per cycle; a signal carries no text,
  and spawned schedulers inherit no pipe, only the environment. Where no launcher took it (plain
  `sglang serve` with the plugin, `Engine`, a pid in the environment that is no ancestor, an
  unwritable file, no kill within MISMATCH_WAIT_S) the check raises as before: SGLang's crash path.
"""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from typing import Callable, Iterator

STOP_SIGNAL = signal.SIGUSR1  # SGLang 0.5.17 and 0.5.23 install no SIGUSR1 handler
EXIT_STOPPED = 3  # the server stopped itself on purpose (docs/troubleshooting.md: exit codes)
MISMATCH_SIGNAL = signal.SIGUSR2  # nor a SIGUSR2 handler
EXIT_MISMATCH = 4  # the in-server hidden-state check stopped the server at model load
MISMATCH_WAIT_S = 60.0  # the launcher's main thread polls SGLang's scheduler pipes every 5 s: it acts well before
NO_REASON = ("HIDDEN-STATE MISMATCH: the in-server check stopped the server at model load (its message did not "
             "reach the launcher); run sglang-patches preflight on the pair for the finding and its fix")


def install(kill_tree: Callable[..., None]) -> None:
    """In the launcher's main process, before SGLang starts: STOP_SIGNAL kills every child process
    (`kill_tree(pid, include_parent=False)`, SGLang's kill_process_tree) and exits EXIT_STOPPED.
    The scheduler logged the reason before signalling, so nothing more is printed here."""
    def handler(signum, frame):  # noqa: ARG001 - signal handler signature
        try:
            kill_tree(os.getpid(), include_parent=False)
        finally:
            os._exit(EXIT_STOPPED)
    signal.signal(STOP_SIGNAL, handler)


def _read_reason(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read(65536)
    except OSError:
        return ""
    return " ".join(text.split())  # one line, whatever the message held


@contextlib.contextmanager
def mismatch_stop(kill_tree: Callable[..., None]) -> Iterator[str]:
    """In the launcher's main process around SGLang's launch: a private directory for the reason file
    (its path in STOP_REASON_ENV, inherited by the schedulers spawned inside) and MISMATCH_SIGNAL's
    handler. On the signal: the reason as one `sglang-patches: error:` line on stderr, then every child
    killed, then exit EXIT_MISMATCH. Afterwards the handler, the variable and the directory are put back."""
    import logging
    import shutil
    import tempfile

    from sglang_patches.vocab.overlay_config import STOP_REASON_ENV

    folder = tempfile.mkdtemp(prefix="sglang-patches-stop-")  # mode 0700: only this user writes in it
    path = os.path.join(folder, "reason")
    once = threading.Lock()  # every rank signals; acquire(False) is one call, so a nested handler cannot pass too

    def handler(signum, frame):  # noqa: ARG001 - signal handler signature
        if not once.acquire(blocking=False):
            return
        try:
            print(f"sglang-patches: error: {_read_reason(path) or NO_REASON}", file=sys.stderr, flush=True)
            # the line above stays the last one: kill_process_tree logs its call at INFO, and 0.5.23's
            # waits for the killed schedulers to be reaped, warning after 10 s; this process ends here
            logging.disable(logging.CRITICAL)
            kill_tree(os.getpid(), include_parent=False)
            shutil.rmtree(folder, ignore_errors=True)
        finally:
            os._exit(EXIT_MISMATCH)

    before_env, before_handler = os.environ.get(STOP_REASON_ENV), signal.getsignal(MISMATCH_SIGNAL)
    os.environ[STOP_REASON_ENV] = path
    signal.signal(MISMATCH_SIGNAL, handler)
    try:
        yield path
    finally:
        signal.signal(MISMATCH_SIGNAL, before_handler)
        if before_env is None:
            os.environ.pop(STOP_REASON_ENV, None)
        else:
            os.environ[STOP_REASON_ENV] = before_env
        shutil.rmtree(folder, ignore_errors=True)


def launcher_ancestor():
    """The drop-in launcher's process (its pid in SERVER_PID_ENV) when it is an ancestor of this one,
    else None; it is the scheduler's parent, or its grandparent past SGLang's data-parallel controller.
    Only an ancestor counts: a stale or reused pid in the environment must not get a signal whose
    default action would end some other process. Raises psutil.NoSuchProcess when an ancestor went
    away while it looked."""
    import psutil

    from sglang_patches.vocab.overlay_config import SERVER_PID_ENV

    pid = os.environ.get(SERVER_PID_ENV, "")
    if not pid.isdigit():
        return None
    return next((p for p in psutil.Process().parents() if p.pid == int(pid)), None)


def request_mismatch_stop(message: str) -> bool:
    """In a scheduler process, at model load: hand `message` to the drop-in launcher and signal it.
    False (nothing sent) when no launcher with the handler is an ancestor or the file cannot be written:
    the caller raises instead."""
    import psutil

    from sglang_patches.vocab.overlay_config import STOP_REASON_ENV

    path = os.environ.get(STOP_REASON_ENV)
    if not path:
        return False  # set only by the launcher's mismatch_stop (not by the plugin, nor Engine)
    try:
        launcher = launcher_ancestor()
    except psutil.NoSuchProcess:
        return False
    if launcher is None:
        return False
    private = f"{path}.{os.getpid()}"
    try:
        with open(private, "w", encoding="utf-8") as fh:
            fh.write(message)
        os.replace(private, path)  # atomic: the launcher reads a whole message or none
        launcher.send_signal(MISMATCH_SIGNAL)
    except (OSError, psutil.Error):
        return False
    return True


def wait_to_be_stopped(seconds: float | None = None) -> None:
    """After request_mismatch_stop: the launcher kills this process. Returns only when it has not within
    `seconds` (MISMATCH_WAIT_S), so that the caller's raise still stops the server through SGLang."""
    time.sleep(MISMATCH_WAIT_S if seconds is None else seconds)
