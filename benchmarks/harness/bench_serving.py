"""SGLang's own serving client (`python -m sglang.bench_serving`), many runs in one process.

A process of this file reads one JSON object per stdin line, {"argv": [bench_serving flags], "log":
PATH}, runs SGLang's `cli_main` with that argv (its prints go to PATH) and answers one JSON line on
stdout, {"rc": N, "s": seconds}. The first line it writes is {"ready": true}, once the client is
imported. The measurement is bench_serving's own: same code, same flags, same --output-file line; what
is saved is the client's start (importing sglang, transformers and its dataset loaders, 10-20 s a
process on the GPU machine), paid once for a benchmark of many short cells instead of once per cell.

`PersistentClient` is the caller's side: it starts the process (early, so the import overlaps other
work), sends one run at a time and kills and restarts the process when a run passes its timeout.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import queue
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

DEFAULT_CLI = "sglang.benchmark.serving:cli_main"  # 0.5.17's home of `python -m sglang.bench_serving`
FALLBACK_CLI = "sglang.bench_serving:cli_main"


def load_cli(spec: str):
    mod, _, func = spec.partition(":")
    try:
        return getattr(importlib.import_module(mod), func)
    except ImportError:
        if spec != DEFAULT_CLI:
            raise
        mod, _, func = FALLBACK_CLI.partition(":")
        return getattr(importlib.import_module(mod), func)


def run_one(cli, argv: list[str], log_path: str) -> int:
    """One bench_serving run; its exit status as the CLI would have given it."""
    saved = sys.argv
    with open(log_path, "w") as fh, contextlib.redirect_stdout(fh), contextlib.redirect_stderr(fh):
        sys.argv = ["sglang.bench_serving", *argv]
        try:
            cli()
            return 0
        except SystemExit as exc:  # argparse errors and the CLI's own exits
            return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except Exception:  # noqa: BLE001 - the run failed, the process serves the next one
            traceback.print_exc()
            return 1
        finally:
            sys.argv = saved


def serve(cli_spec: str) -> int:
    answers = sys.stdout  # only answers go there; the client's own prints go to each run's log
    sys.stdout = sys.stderr
    cli = load_cli(cli_spec)
    print(json.dumps({"ready": True}), file=answers, flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        t = time.time()
        rc = run_one(cli, [str(a) for a in req["argv"]], req["log"])
        print(json.dumps({"rc": rc, "s": round(time.time() - t, 2)}), file=answers, flush=True)
    return 0


class PersistentClient:
    """The caller's side of one client process (`start` early; `run` one bench_serving argv)."""

    def __init__(self, python: str = sys.executable, cli: str = DEFAULT_CLI, stderr_path: str | None = None):
        self.python, self.cli, self.stderr_path = python, cli, stderr_path
        self.proc: subprocess.Popen | None = None
        self.lines: queue.Queue = queue.Queue()
        self.ready = False
        self.unusable = False  # set when a process exited before it was ready: callers use a subprocess

    def start(self) -> "PersistentClient":
        if self.stderr_path:
            with open(self.stderr_path, "a") as err:  # the child keeps its own descriptor
                self.proc = self._spawn(err)
        else:
            self.proc = self._spawn(subprocess.DEVNULL)
        self.ready, self.lines = False, queue.Queue()
        threading.Thread(target=self._pump, args=(self.proc, self.lines), daemon=True).start()
        return self

    def _spawn(self, err) -> subprocess.Popen:
        return subprocess.Popen([self.python, str(Path(__file__).resolve()), "--cli", self.cli],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True, bufsize=1)

    @staticmethod
    def _pump(proc, lines) -> None:
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)  # the process ended

    def _answer(self, timeout: float) -> dict:
        try:
            line = self.lines.get(timeout=max(0.1, timeout))
        except queue.Empty:
            self.stop()
            raise TimeoutError(f"the client process gave no answer in {timeout:.0f} s (killed)") from None
        if line is None:
            rc = self.proc.wait() if self.proc else None
            self.proc = None
            raise RuntimeError(f"the client process exited (status {rc}); its stderr: {self.stderr_path}")
        return json.loads(line)

    def run(self, argv: list[str], log_path: str, timeout: float) -> tuple[int, float]:
        """(exit status, seconds) of one run; restarts a process that died or was killed before."""
        deadline = time.time() + timeout
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        if not self.ready:
            if not self._answer(deadline - time.time()).get("ready"):
                raise RuntimeError("the client process did not say ready")
            self.ready = True
        self.proc.stdin.write(json.dumps({"argv": list(argv), "log": str(log_path)}) + "\n")
        self.proc.stdin.flush()
        ans = self._answer(deadline - time.time())
        return int(ans["rc"]), float(ans["s"])

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


def run_bench_serving(client: PersistentClient | None, cmd: list[str], log_path: Path, timeout: float) -> dict:
    """One `python -m sglang.bench_serving ...` command (`cmd`, as a subprocess would run it): in the
    persistent client when there is one, else as a subprocess. A client that cannot start (it exits
    before saying ready) is given up for a subprocess of the same command. Returns rc, the client's
    output, the seconds and how it ran."""
    assert cmd[1:3] == ["-m", "sglang.bench_serving"], cmd
    if client is not None and not client.unusable:
        try:
            rc, secs = client.run(cmd[3:], str(log_path), timeout)
            return {"rc": rc, "output": Path(log_path).read_text(errors="replace"), "s": secs, "how": "persistent"}
        except RuntimeError as exc:
            if client.ready:
                raise
            client.unusable = True  # never ready: every later cell runs as a subprocess
            print(f"persistent client unusable ({exc}); running bench_serving as a subprocess", file=sys.stderr)
    t = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    Path(log_path).write_text(r.stdout + r.stderr)
    return {"rc": r.returncode, "output": r.stdout + r.stderr, "s": round(time.time() - t, 2), "how": "subprocess"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cli", default=DEFAULT_CLI, help="MODULE:FUNCTION of the client's command line")
    return serve(ap.parse_args().cli)


if __name__ == "__main__":
    sys.exit(main())
