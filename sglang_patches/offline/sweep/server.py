"""Start, wait for and stop a drop-in (or stock) SGLang server as a subprocess, for benchmarks.

The server's output goes to a log file; a server that dies or does not become healthy in time
raises `ServerError` with the log's tail, and `stop()` always kills the whole process group.
"""
from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request


class ServerError(RuntimeError):
    pass


_LIVE: set = set()  # started and not yet stopped: stopped on SIGTERM / exit, so no server outlives us


def _stop_all(*_):
    for srv in list(_LIVE):
        try:
            srv.stop()
        except Exception:  # noqa: BLE001 - best effort while exiting
            pass


def _on_sigterm(signum, frame):
    _stop_all()
    raise SystemExit(128 + signum)


def _install_cleanup() -> None:
    """A SIGTERM (a CI timeout, `kill`, a deadline) would end Python without `finally` blocks and leave
    the servers (own process groups) holding GPU memory: stop them first. Only where nobody else
    handles SIGTERM, and only from the main thread (signal handlers can be set only there)."""
    if getattr(_install_cleanup, "done", False):
        return
    _install_cleanup.done = True
    atexit.register(_stop_all)
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _on_sigterm)


class Server:
    def __init__(self, args: list[str], *, port: int, log_path: str, overlay: bool = True,
                 env: dict | None = None, host: str = "127.0.0.1"):
        module = "sglang_patches.launch" if overlay else "sglang.launch_server"
        self.cmd = [sys.executable, "-m", module, *args, "--host", host, "--port", str(port)]
        self.url = f"http://{host}:{port}"
        self.log_path = log_path
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen | None = None
        self.started_s: float | None = None

    def start(self) -> "Server":
        os.makedirs(os.path.dirname(os.path.abspath(self.log_path)), exist_ok=True)
        self._log = open(self.log_path, "w")
        self._t0 = time.time()
        _install_cleanup()
        self.proc = subprocess.Popen(self.cmd, stdout=self._log, stderr=subprocess.STDOUT, env=self.env,
                                     start_new_session=True)
        _LIVE.add(self)
        return self

    def wait_ready(self, timeout: float = 300.0) -> "Server":
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise ServerError(f"server exited with code {self.proc.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(self.url + "/health_generate", timeout=5) as resp:
                    if resp.status == 200:
                        self.started_s = time.time() - self._t0
                        return self
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            time.sleep(1.0)
        raise ServerError(f"server not healthy after {timeout:.0f} s:\n{self.log_tail()}")

    def wait_exit(self, timeout: float = 300.0) -> int | None:
        """For servers expected to fail: wait until the process ends; return its code (None = still up)."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def poll(self) -> int | None:
        """The exit code if the server process has ended, else None (also None before start)."""
        return None if self.proc is None else self.proc.poll()

    def log_tail(self, n: int = 40) -> str:
        try:
            with open(self.log_path, errors="replace") as fh:
                return "".join(fh.readlines()[-n:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        if self.proc is None:
            return
        _LIVE.discard(self)
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=20)
            except (subprocess.TimeoutExpired, ProcessLookupError):
                pass
        try:  # also when the launcher is gone: its scheduler processes may still hold the GPU
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self._log.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
