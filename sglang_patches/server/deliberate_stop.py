"""A scheduler process asking the drop-in launcher to stop the server on purpose.

`--on-accept-collapse exit` must stop the whole server from inside a scheduler process. SGLang's
own route for that is SIGQUIT to the HTTP-serving process, whose handler treats it as a crash: in
0.5.17 it dumps py-spy stacks, asks for CUDA coredumps and sleeps
`SGLANG_CUDA_COREDUMP_BEFORE_CRASH_WAIT_SECS` (default 60 s) before it kills the process tree. A
deliberate stop is not a crash, so the drop-in launcher installs a handler for STOP_SIGNAL that
kills the tree at once and exits with EXIT_STOPPED. Schedulers under a plain `sglang serve`
(the opt-in plugin) have no such handler and still use SIGQUIT.
"""
from __future__ import annotations

import os
import signal
from typing import Callable

STOP_SIGNAL = signal.SIGUSR1  # SGLang 0.5.17 installs no SIGUSR1 handler
EXIT_STOPPED = 3  # the server stopped itself on purpose (docs/troubleshooting.md: exit codes)


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
