"""`profile_server()`: one profiling window on a running SGLang server (py-spy + torch profiler +
the overlay's phase timing, same interval), written to a new directory.

Order: check the server and find its scheduler pids -> start py-spy on each -> reset /spec_timing ->
/start_profile -> wait -> stop py-spy (SIGINT) -> GET /spec_timing -> /stop_profile -> summaries.
Whatever happens after the start (Ctrl-C, a failed step), children are stopped in `finally` and
the summary says what is partial. Returns the summary dict; `summary["exit_code"]` is 0 when
everything requested was collected, 1 when something is missing, 130 when interrupted.
"""
from __future__ import annotations

import os
import sys
import time

from sglang_patches.cliargs import check_dir_creatable
from sglang_patches.errors import UserError
from sglang_patches.profiling import flamegraph, pyspy, speedscope
from sglang_patches.profiling import summary as summary_mod
from sglang_patches.profiling.client import Client, RequestFailed, overlay_markers


def _check_out_dir(out_dir: str) -> str:
    out_dir = os.path.abspath(os.path.expanduser(out_dir))
    check_dir_creatable(out_dir, "--out")
    if os.path.exists(out_dir) and (not os.path.isdir(out_dir) or os.listdir(out_dir)):
        raise UserError(f"--out {out_dir} already exists and is not an empty directory; "
                        "give a new directory (profiles are never overwritten)")
    return out_dir


def _prepare_out_dir(out_dir: str) -> str:
    out_dir = _check_out_dir(out_dir)
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create --out {out_dir}: {exc.strerror or exc}") from None
    return out_dir


def _discover(client: Client, info: dict, markers: list[dict]):
    try:
        from sglang_patches.profiling import pids
    except ImportError as exc:  # psutil: always there next to SGLang, maybe not on a client machine
        raise UserError(f"finding the scheduler processes needs psutil ({exc}); `pip install psutil`, "
                        "or pass --no-py-spy") from None
    return pids.discover(client.host, client.port, info, markers)


class _Progress:
    def __init__(self, stream, seconds: float):
        self.stream, self.seconds, self.tty = stream, seconds, getattr(stream, "isatty", lambda: False)()
        self._last = -1

    def update(self, elapsed: float, status: str) -> None:
        sec = int(elapsed)
        if self.tty:
            self.stream.write(f"\rprofiling {sec:>4d}/{self.seconds:g} s | {status}   ")
            self.stream.flush()
        elif sec != self._last and (sec % 5 == 0 or sec >= self.seconds):
            self.stream.write(f"profiling {sec}/{self.seconds:g} s | {status}\n")
        self._last = sec

    def done(self) -> None:
        if self.tty:
            self.stream.write("\n")


def profile_server(url: str, seconds: float, out_dir: str, *, native: bool = False, rate: int = 100,
                   torch_profiler: bool = True, py_spy: bool = True, activities=("CPU", "GPU"),
                   api_key: str | None = None, top: int = 15, py_spy_bin: str | None = None,
                   log=sys.stderr) -> dict:
    """Profile the SGLang server at `url` for `seconds` into the new directory `out_dir`."""
    if not (isinstance(seconds, (int, float)) and 0 < seconds <= 86400):  # NaN fails this too
        raise UserError(f"--seconds must be > 0 and at most 86400 (got {seconds})")
    if not 1 <= int(rate) <= 10000:
        raise UserError(f"--rate must be between 1 and 10000 Hz (got {rate})")
    client = Client(url, api_key=api_key)
    _check_out_dir(out_dir)  # before touching the server
    info = client.server_info()  # read only: a wrong URL is named before a missing py-spy
    spy_bin = pyspy.find_py_spy(py_spy_bin) if py_spy else None
    out_dir = _prepare_out_dir(out_dir)
    markers = overlay_markers(info)
    overlay = next((m["version"] for m in markers), None)
    problems: list[str] = []
    notes: list[str] = []
    schedulers, found_notes = _discover(client, info, markers) if py_spy else ([], [])
    notes += found_notes
    if py_spy and not schedulers:
        problems.append("py-spy: no scheduler process to attach to on this host (see notes)")
    for s in schedulers:
        log.write(f"scheduler pid {s.pid} {s.label} ({s.title or 'no title'}; rank from {s.rank_from})\n")

    meta = {"url": client.url, "sglang_version": info.get("version"), "overlay_version": overlay,
            "seconds": seconds, "interrupted": False, "pyspy_cmd": None,
            "options": {"native": native, "rate": rate, "torch_profiler": torch_profiler, "py_spy": py_spy,
                        "activities": list(activities)}}
    torch = {"requested": torch_profiler, "started": False, "stopped": False, "files": [], "message": None,
             "output_dir": os.path.join(out_dir, "torch") if torch_profiler else None}
    recordings: dict[int, pyspy.Recording] = {}
    timing = None
    t0 = t1 = None
    progress = _Progress(log, seconds)
    try:
        if py_spy and schedulers:
            os.makedirs(os.path.join(out_dir, "pyspy"))
            for s in schedulers:
                base = os.path.join(out_dir, "pyspy", f"scheduler-{s.label}-pid{s.pid}")
                cmd = pyspy.build_command(spy_bin, s.pid, base + ".speedscope.json", rate=rate,
                                          duration_s=int(seconds) + 60, native=native)
                meta["pyspy_cmd"] = pyspy.display_command(cmd)
                recordings[s.pid] = pyspy.Recording(cmd, s.pid, base + ".speedscope.json", base + ".pyspy.log")
        if overlay:
            try:
                client.reset_spec_timing()
            except RequestFailed as exc:
                problems.append(f"phase timing: reset failed ({exc}); the window covers more than the profile")
        else:
            notes.append("the server runs without the sglang_patches overlay: no phase-timing window "
                         "(start it with `python -m sglang_patches.launch` for host-gap / GPU-gap shares)")
        t0 = time.time()
        if torch_profiler:
            os.makedirs(torch["output_dir"], exist_ok=True)
            try:
                client.start_profile(torch["output_dir"], activities, profile_id=f"sglang-patches-{int(t0)}")
                torch["started"] = True
            except RequestFailed as exc:
                torch["message"] = f"start failed: {exc}"
                problems.append(f"torch profiler: /start_profile failed ({exc})")
        while True:
            elapsed = time.time() - t0
            for pid, rec in recordings.items():
                if rec.result is None and not rec.running():  # ended early: say so now, not only at the end
                    ok, message = rec.stop()
                    log.write(("" if ok else "py-spy stopped early: ") + message + "\n")
            running = sum(r.running() for r in recordings.values())
            progress.update(elapsed, f"py-spy {running}/{len(recordings)} running | torch profiler "
                                     f"{'on' if torch['started'] else 'off'} | timing {'on' if overlay else 'n/a'}")
            if elapsed >= seconds:
                break
            time.sleep(min(0.2, seconds - elapsed))
    except KeyboardInterrupt:
        meta["interrupted"] = True
        problems.append(f"interrupted after {time.time() - (t0 or time.time()):.1f} of {seconds:g} s: "
                        "every part covers a shorter window")
    except Exception as exc:  # noqa: BLE001 - keep what was collected, say what failed
        meta["failed"] = True
        problems.append(f"profiling stopped early by an error: {type(exc).__name__}: {exc}")
    finally:
        progress.done()
        t1 = time.time()
        stop_results = {pid: r.stop() for pid, r in recordings.items()}
        if overlay and t0 is not None:
            try:
                timing = client.spec_timing()
            except RequestFailed as exc:
                problems.append(f"phase timing: GET /spec_timing failed ({exc})")
        if torch["started"]:
            log.write("stopping the torch profiler (SGLang writes the traces; this can take a while)\n")
            try:
                client.stop_profile()
                torch["stopped"] = True
            except RequestFailed as exc:
                torch["message"] = f"stop failed: {exc}"
                problems.append(f"torch profiler: /stop_profile failed ({exc})")
    meta["window"] = {"start": t0, "end": t1, "wall_s": None if t0 is None else t1 - t0}
    if isinstance(timing, dict) and not any(isinstance(d.get("spec_timing"), dict) for d in timing.get("dp") or []):
        notes.append("the overlay reported no phase-timing window (no speculative decode cycle in the window, "
                     "or the server runs with --patches without timing)")

    if torch["started"]:
        tdir = torch["output_dir"]
        torch["files"] = sorted(os.path.join(tdir, f) for f in os.listdir(tdir)) if os.path.isdir(tdir) else []
        if not torch["files"]:
            msg = (f"torch profiler: no trace file appeared in {tdir} (the server writes it on its own host; "
                   "a remote server keeps it there)")
            problems.append(msg)
    pyspy_out: dict[int, dict] = {}
    for s in schedulers:
        rec = recordings.get(s.pid)
        if rec is None:
            continue
        ok, message = stop_results[s.pid]
        entry = {"ok": ok, "message": message, "speedscope": rec.out_file if ok else None, "log": rec.log_file,
                 "recorded_s": rec.recorded_s if ok else None}
        if ok:
            try:
                data = speedscope.load(rec.out_file)
                entry["threads"] = speedscope.threads(data)
                entry["top"] = speedscope.top_functions(data, n=top)
                entry["svg"] = flamegraph.write(speedscope.stacks(data), rec.out_file.replace(".speedscope.json", ".svg"),
                                                title=f"scheduler {s.label} pid {s.pid}")
            except (OSError, ValueError, KeyError, IndexError) as exc:
                entry.update(ok=False, message=f"py-spy output of pid {s.pid} unreadable: {exc}")
        if not entry["ok"]:
            problems.append(entry["message"])
        pyspy_out[s.pid] = entry

    result = summary_mod.build(meta=meta, schedulers=[s.to_dict() for s in schedulers], pyspy=pyspy_out,
                               timing=timing if isinstance(timing, dict) else None,
                               markers=markers, torch=torch, problems=problems, notes=notes)
    result["exit_code"] = 130 if meta["interrupted"] else (1 if problems else 0)
    result["files"] = dict(zip(("json", "markdown"), summary_mod.write(result, out_dir)))
    return result
