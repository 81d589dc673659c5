"""Run independent GPU benchmarks side by side on one multi-GPU machine, within one bounded run.

    python benchmarks/run_parallel.py --out DIR --deadline 560 \\
        --job "demo|0|python benchmarks/trained_pair_demo.py --out {out}/demo" \\
        --job "tp|2,3|python benchmarks/draft_tp_x2.py --out {out}/tp ;; python benchmarks/draft_tp_x2.py ..."

A job is `NAME|GPUS|CMD[ ;; CMD ...]`: its commands run one after another (the next starts even when
one fails) with CUDA_VISIBLE_DEVICES=GPUS; jobs run at the same time, each on its own GPUs, so
their timings do not share a GPU (they do share the host's CPUs). `{out}` in a command is --out.
`wait-for FILE` as a command waits until FILE exists (another job's `touch FILE`), up to the
deadline. At --deadline seconds every command still running is stopped (its process group gets
SIGINT, then SIGTERM, then SIGKILL) and recorded as such, so a bounded run always returns what finished. Each
job's output goes to DIR/logs/NAME.log; DIR/jobs.json holds every command's exit code and seconds,
and a short table is printed last.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time


def parse_job(text: str) -> dict:
    parts = text.split("|", 2)
    if len(parts) != 3 or not parts[0].strip() or not parts[2].strip():
        raise SystemExit(f"run_parallel: bad --job {text!r}; expected NAME|GPUS|CMD[ ;; CMD ...]")
    gpus = parts[1].strip()
    if gpus and not all(g.strip().isdigit() for g in gpus.split(",")):
        raise SystemExit(f"run_parallel: bad GPU list {gpus!r} in job {parts[0]!r}; expected e.g. 0 or 2,3")
    return {"name": parts[0].strip(), "gpus": gpus, "cmds": [c.strip() for c in parts[2].split(";;") if c.strip()]}


def _stop(proc: subprocess.Popen) -> None:
    # SIGINT first: Python runs its `finally` blocks (benchmarks stop their SGLang servers, which live
    # in their own sessions and would otherwise keep GPU memory into the next command).
    for sig, wait in ((signal.SIGINT, 30), (signal.SIGTERM, 15), (signal.SIGKILL, 5)):
        if proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
        except subprocess.TimeoutExpired:
            pass


def run_job(job: dict, out: str, deadline: float, rows: list, lock: threading.Lock) -> None:
    env = dict(os.environ)
    if job["gpus"]:
        env["CUDA_VISIBLE_DEVICES"] = job["gpus"]
    log_path = os.path.join(out, "logs", f"{job['name']}.log")
    with open(log_path, "a") as log:
        for cmd in job["cmds"]:
            cmd = cmd.replace("{out}", out)
            t0 = time.time()
            row = {"job": job["name"], "gpus": job["gpus"], "cmd": cmd}
            if time.time() >= deadline:
                row.update(rc=None, seconds=0.0, status="not started (deadline)")
            elif cmd.startswith("wait-for "):
                path = cmd.split(None, 1)[1]
                while not os.path.exists(path) and time.time() < deadline:
                    time.sleep(2)
                row.update(rc=0 if os.path.exists(path) else None, status="ok" if os.path.exists(path) else "timed out")
            else:
                log.write(f"\n===== [{time.strftime('%H:%M:%S')}] {cmd}\n")
                log.flush()
                proc = subprocess.Popen(["bash", "-c", cmd], stdout=log, stderr=subprocess.STDOUT, env=env,
                                        start_new_session=True)
                try:
                    rc = proc.wait(max(1.0, deadline - time.time()))
                    row.update(rc=rc, status="ok" if rc == 0 else "failed")
                except subprocess.TimeoutExpired:
                    _stop(proc)
                    row.update(rc=proc.returncode, status="stopped at deadline")
            row["seconds"] = round(time.time() - t0, 1)
            with lock:
                rows.append(row)
                print(f"[{time.strftime('%H:%M:%S')}] {row['job']}: {row['status']} ({row['seconds']} s): {cmd[:100]}",
                      flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="results folder (created); {out} in commands")
    ap.add_argument("--job", action="append", required=True, metavar="NAME|GPUS|CMD[ ;; CMD ...]")
    ap.add_argument("--deadline", type=float, default=540, help="seconds after which commands are stopped")
    import figure_cli  # benchmarks/, beside this script
    figure_cli.declare(ap, figure='no figure of its own: runs other entry points side by side on a multi-GPU machine', folder=('2026-11-29-draft-tp-tp2-8b', '2026-12-01-trained-8b'),
                       duration="its jobs' time, at most --deadline (540 s)")
    args = ap.parse_args(argv)
    if args.dry_run:
        return figure_cli.dry_run(out=args.out, cases=list(args.job), notes=[f"deadline {args.deadline:.0f} s"])
    jobs = [parse_job(x) for x in args.job]
    names = [jb["name"] for jb in jobs]
    if len(set(names)) != len(names):
        raise SystemExit(f"run_parallel: job names must differ: {names}")
    os.makedirs(os.path.join(args.out, "logs"), exist_ok=True)
    # A shell starts background jobs (`cmd &`, nohup) with SIGINT ignored, and an ignored signal stays
    # ignored across exec: _stop's SIGINT would then do nothing for 30 s and the commands' `finally`
    # blocks (which stop their SGLang servers) would never run. A handler is reset to the default on
    # exec, so installing Python's own one here gives every command a default SIGINT.
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    deadline = time.time() + args.deadline
    rows: list = []
    lock = threading.Lock()
    threads = [threading.Thread(target=run_job, args=(jb, args.out, deadline, rows, lock)) for jb in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with open(os.path.join(args.out, "jobs.json"), "w") as fh:
        json.dump({"argv": sys.argv, "rows": rows}, fh, indent=1)
    print("| job | gpus | status | s | command |")
    for r in rows:
        print(f"| {r['job']} | {r['gpus']} | {r['status']} | {r['seconds']} | {shlex.split(r['cmd'])[:4]} |")
    return 0 if all(r["status"] == "ok" for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
