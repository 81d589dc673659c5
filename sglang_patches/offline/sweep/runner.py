"""Run configurations: one drop-in server per configuration, every batch size measured on it.

Per configuration: start `python -m sglang_patches.launch <model flags> <spec flags> <server flags>
--timing-log DIR/timing/<config>.jsonl` (the baseline: no speculative flags and `--patches none`),
wait until healthy, then per batch size: a warm-up run, `POST /spec_timing/reset`, `repeats` runs
of `run_batch` (batch_size in flight, requests_per_bs x batch_size requests), `GET /spec_timing`.
Every row goes to results.jsonl at once (fsync). A configuration that fails (the server exits, is
not healthy in time, a request times out) becomes failed rows with the reason and its log path, and
the sweep goes on. (config, batch size) pairs already ok in results.jsonl are skipped (--resume).

`server_cls`, `run_batch` and `http` are parameters so tests can replace the process boundary.
"""
from __future__ import annotations

import datetime
import os
import signal
import socket
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from sglang_patches.errors import UserError
from sglang_patches.offline.sweep import results as res
from sglang_patches.whatif.grid import Config, config_name
from sglang_patches.offline.sweep.load import run_batch as _run_batch
from sglang_patches.httpjson import http_json
from sglang_patches.offline.sweep.server import Server, ServerError

PHASES = ("draft", "verify", "extend", "cycle", "host_gap")


@dataclass
class RunOptions:
    out_dir: str
    model_flags: list[str]            # --model-path T [--load-format F]
    spec_flags: list[str]             # --speculative-algorithm A --speculative-draft-model-path D
    server_flags: list[str]           # defaults (attention/sampling backend, cuda graph bs) + extra
    batch_sizes: list[int]
    prompts: list[str]
    max_new_tokens: int = 256
    repeats: int = 3
    timeout: float = 600.0            # server start, and each request
    requests_per_bs: int = 2
    warmup_tokens: int = 64
    env: dict = field(default_factory=dict)
    meta: dict = field(default_factory=dict)   # command, sglang version, gpu, ... copied into rows
    profile_seconds: float = 0.0      # > 0: `sglang-patches profile` window per speculative (config, bs)
    ignore_eos: bool = True           # False: requests may end early (greedy: same lengths in every config)
    simulate_rates: list | None = None  # simulated acceptance: each speculative server gets its first `steps`


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_args(cfg: Config | None, opts: RunOptions) -> list[str]:
    if cfg is None:
        return [*opts.model_flags, *opts.server_flags, "--patches", "none"]
    timing = str(Path(opts.out_dir) / "timing" / f"{cfg.name}.jsonl")
    sim = []
    if opts.simulate_rates is not None:
        sim = ["--simulate-acceptance", ",".join(repr(float(r)) for r in opts.simulate_rates[:cfg.steps])]
    return [*opts.model_flags, *opts.spec_flags, *cfg.server_flags(), *opts.server_flags, "--timing-log", timing,
            *sim]


def _fmt_s(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(round(seconds))
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"


class Progress:
    """Counts rows and servers; ETA = mean start time x servers left + mean measure time x rows left."""

    def __init__(self, rows: int, servers: int, now=time.time, out=None):
        self.rows_total, self.servers_total = rows, servers
        self.rows_done = self.servers_done = 0
        self.start_s: list[float] = []
        self.measure_s: list[float] = []
        self.t0, self.now, self.out = now(), now, out or sys.stdout

    def eta(self) -> float | None:
        if not self.start_s:
            return None
        rows_left = self.rows_total - self.rows_done
        servers_left = self.servers_total - self.servers_done
        per_row = statistics.mean(self.measure_s) if self.measure_s else 0.0
        return statistics.mean(self.start_s) * servers_left + per_row * rows_left

    def line(self, row: dict, baseline: dict) -> str:
        self.rows_done += 1
        head = f"[{self.rows_done}/{self.rows_total}] {row['config']:<14} bs {row['batch_size']:>4}: "
        if row["status"] == "ok":
            base = baseline.get(row["batch_size"])
            ratio = f" (x{row['tok_s'] / base:.2f} vs baseline)" if base and row["config"] != "baseline" else ""
            al = f" accept {row['accept_length']:.2f}" if row.get("accept_length") else ""
            head += f"{row['tok_s']:.1f} tok/s{ratio}{al}"
        else:
            head += f"FAILED: {row['reason']} (log: {row.get('log_path')})"
        return head + f" | elapsed {_fmt_s(self.now() - self.t0)}, ETA {_fmt_s(self.eta())}"

    def emit(self, row: dict, baseline: dict) -> None:
        print(self.line(row, baseline), file=self.out, flush=True)


def stop_server(srv, grace_s: float = 30.0) -> None:
    """Stop the server and wait until its whole process group is gone (its scheduler children hold
    GPU memory; the next server sizes its KV pool from what is free when it starts)."""
    srv.stop()
    proc = getattr(srv, "proc", None)
    if proc is None or not isinstance(getattr(proc, "pid", None), int):
        return
    deadline, killed = time.time() + grace_s, False
    while True:
        try:
            os.killpg(proc.pid, 0)
        except (ProcessLookupError, PermissionError):
            return
        if time.time() > deadline:
            if killed:
                return
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                return
            deadline, killed = time.time() + 10.0, True
        time.sleep(0.5)


def _summary_fields(timing: dict | None) -> dict:
    if not timing:
        return {"accept_length": None, "pos_rates": None, "cond_rates": None,
                "phases_p50_ms": None, "phase_shares": None, "cycles": None}
    phases = timing.get("phases") or {}
    pos = [r for r in (timing.get("pos_rates") or []) if r is not None]
    cond, prev = [], 1.0
    for r in pos:
        cond.append(r / prev if prev > 0 else 0.0)
        prev = r
    return {"accept_length": timing.get("accept_length"), "pos_rates": pos, "cond_rates": cond,
            "phases_p50_ms": {p: (phases.get(p) or {}).get("p50") for p in PHASES},
            "phase_shares": {p: (phases.get(p) or {}).get("share") for p in PHASES},
            "cycles": (timing.get("cycles") or {}).get("counted")}


def _default_profile(url: str, seconds: float, out_dir: str) -> dict:
    from sglang_patches.profiling import profile_server

    return profile_server(url, seconds, out_dir)


def profile_window(url: str, cfg: Config, bs: int, opts: RunOptions, run_batch, profile) -> dict:
    """Profile one (config, batch size) while `bs` requests decode; failures become notes, never rows."""
    import threading

    out_dir = str(Path(opts.out_dir) / "profiles" / f"{config_name(cfg)}_bs{bs}")
    load = threading.Thread(target=run_batch, args=(url, opts.prompts, bs, opts.max_new_tokens * 8),
                            kwargs={"num_requests": bs, "timeout": opts.timeout}, daemon=True)
    load.start()
    try:
        summary = profile(url, opts.profile_seconds, out_dir)
        return {"profile_dir": out_dir, "profile_problems": (summary or {}).get("problems")}
    except Exception as exc:  # noqa: BLE001 - profiling is an extra; the row stays ok
        return {"profile_dir": None, "profile_problems": [f"profile failed: {exc}"]}
    finally:
        load.join(timeout=opts.timeout)


def measure(url: str, cfg: Config | None, bs: int, opts: RunOptions, run_batch, http) -> dict:
    """Warm-up, reset, `repeats` timed runs, spec timing summary. Raises on request failure."""
    n = opts.requests_per_bs * bs
    # warm-up on the prompts after the timed ones; repeat r times prompts [r n, (r + 1) n): repeats
    # measure different prompts (a handful of prompts gave a few-prompt accept length), and every
    # configuration and the baseline see the same ones
    run_batch(url, opts.prompts, bs, min(opts.warmup_tokens, opts.max_new_tokens), num_requests=bs,
              timeout=opts.timeout, offset=opts.repeats * n, ignore_eos=opts.ignore_eos)
    notes = []
    if cfg is not None:
        try:
            http(url + "/spec_timing/reset", {}, timeout=30)
        except Exception as exc:  # noqa: BLE001 - timing is optional; tok/s still counts
            notes.append(f"/spec_timing/reset failed: {exc}")
    runs = [run_batch(url, opts.prompts, bs, opts.max_new_tokens, num_requests=n, timeout=opts.timeout,
                      offset=r * n, ignore_eos=opts.ignore_eos) for r in range(opts.repeats)]
    timing = None
    if cfg is not None:
        try:
            timing = (http(url + "/spec_timing", None, timeout=30) or {}).get("spec_timing")
        except Exception as exc:  # noqa: BLE001
            notes.append(f"GET /spec_timing failed: {exc}")
    tok_s = [r["tok_s"] for r in runs]
    per_req = [r["tok_s_per_request"] for r in runs]
    client_al = [r["accept_length"] for r in runs if r.get("accept_length")]
    out = {"tok_s": statistics.median(tok_s), "tok_s_repeats": tok_s,
           "tok_s_per_request": statistics.median(per_req), "tok_s_per_request_repeats": per_req,
           "output_tokens": sum(r["output_tokens"] for r in runs), "requests": opts.requests_per_bs * bs,
           "accept_length_client": statistics.mean(client_al) if client_al else None, "notes": notes}
    out.update(_summary_fields(timing))
    if out["accept_length"] is None and cfg is not None:
        out["accept_length"] = out["accept_length_client"]
    return out


def log_size(log_path: str | None) -> int:
    try:
        return os.path.getsize(log_path) if log_path else 0
    except OSError:
        return 0


def steady_fields(log_path: str | None, bs: int, start_offset: int = 0) -> dict:
    """The row's steady-decode reading from its server's own log (offline/decode_log.py): windows
    at #running-req = bs written since byte `start_offset` (the log's size when the row's warm-up
    began), so neither an earlier batch size's tail nor a later profile window gets in. Read on
    the sweep's client process once the row's requests ended (SGLang's logging handler flushes
    each line), before any profile window runs."""
    from sglang_patches.offline.decode_log import steady_tok_s

    if not log_path:
        return {"steady_tok_s": None, "steady_windows": 0, "steady_cycle_ms": None}
    try:
        return steady_tok_s(log_path, bs, start_offset=start_offset)
    except (UserError, OSError, ValueError) as err:   # an extra reading: never fails the row
        return {"steady_tok_s": None, "steady_windows": 0, "steady_cycle_ms": None, "steady_error": str(err)[:200]}


def _log_hint(tail: str) -> str:
    low = tail.lower()
    if "out of memory" in low or "outofmemoryerror" in low:
        return " (CUDA out of memory in the log)"
    if "traceback" in low:
        return " (a traceback is in the log)"
    return ""


def _reason(exc: BaseException, srv, opts: RunOptions, bs: int | None) -> str:
    code = srv.poll() if hasattr(srv, "poll") else None
    tail = srv.log_tail(60) if hasattr(srv, "log_tail") else ""
    where = "while starting" if bs is None else f"at batch size {bs}"
    if code is not None:
        return f"server exited with code {code} {where}{_log_hint(tail)}"
    if isinstance(exc, ServerError):
        first = str(exc).splitlines()[0].rstrip(":") if str(exc) else "server error"
        return f"{first}{_log_hint(tail)}"
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, (TimeoutError, socket.timeout)) or "timed out" in text.lower():
        return f"request timed out {where} (limit {opts.timeout:.0f} s)"
    return f"{text.splitlines()[0][:300] if text else type(exc).__name__} {where}"


def _row(cfg: Config | None, bs: int, opts: RunOptions, srv, **fields) -> dict:
    row = {"schema": 1, "config": config_name(cfg), "spec": None if cfg is None else cfg.to_dict(),
           "batch_size": bs, "max_new_tokens": opts.max_new_tokens, "repeats": opts.repeats,
           "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
           "server_cmd": list(getattr(srv, "cmd", []) or []), "log_path": getattr(srv, "log_path", None),
           "timing_log": None if cfg is None else str(Path(opts.out_dir) / "timing" / f"{cfg.name}.jsonl")}
    row.update(opts.meta)
    row.update(fields)
    return row


def run_configs(configs: list, opts: RunOptions, *, server_cls=Server, run_batch=_run_batch, http=http_json,
                now=time.time, out=None, profile=_default_profile) -> list[dict]:
    """Run every (config, batch size) not yet ok in DIR/results.jsonl; return the rows written now."""
    out = out or sys.stdout
    existing = res.read_rows(opts.out_dir)
    done = res.done_keys(existing)
    baseline = {int(r["batch_size"]): r["tok_s"] for r in existing if r["config"] == "baseline" and r.get("status") == "ok"}
    todo = []
    for cfg in configs:
        left = [bs for bs in opts.batch_sizes if (config_name(cfg), bs) not in done]
        if left:
            todo.append((cfg, left))
    skipped = sum(len(opts.batch_sizes) for _ in configs) - sum(len(b) for _, b in todo)
    if skipped:
        print(f"sglang-patches sweep: {skipped} (config, batch size) rows already ok in "
              f"{res.RESULTS}; skipped", file=out, flush=True)
    progress = Progress(sum(len(b) for _, b in todo), len(todo), now=now, out=out)
    written: list[dict] = []

    def emit(row):
        res.append_row(opts.out_dir, row)
        written.append(row)
        if row["config"] == "baseline" and row["status"] == "ok":
            baseline[row["batch_size"]] = row["tok_s"]
        progress.emit(row, baseline)

    for cfg, bss in todo:
        name = config_name(cfg)
        srv = server_cls(server_args(cfg, opts), port=free_port(), log_path=str(Path(opts.out_dir) / "logs" / f"{name}.log"),
                         overlay=True, env=opts.env)
        t0 = now()
        try:
            try:
                srv.start()
                srv.wait_ready(opts.timeout)
            except Exception as exc:  # noqa: BLE001 - a failed config is a row, not the end
                reason = _reason(exc, srv, opts, None)
                progress.start_s.append(now() - t0)
                progress.servers_done += 1
                for bs in bss:
                    emit(_row(cfg, bs, opts, srv, status="failed", reason=reason, server_start_s=None))
                continue
            start_s = now() - t0
            progress.start_s.append(start_s)
            progress.servers_done += 1
            for i, bs in enumerate(bss):
                t1 = now()
                offset = log_size(getattr(srv, "log_path", None))
                try:
                    m = measure(srv.url, cfg, bs, opts, run_batch, http)
                    m.update(steady_fields(getattr(srv, "log_path", None), bs, offset))
                    if opts.profile_seconds > 0 and cfg is not None:
                        m.update(profile_window(srv.url, cfg, bs, opts, run_batch, profile))
                except Exception as exc:  # noqa: BLE001
                    reason = _reason(exc, srv, opts, bs)
                    progress.measure_s.append(now() - t1)
                    emit(_row(cfg, bs, opts, srv, status="failed", reason=reason, server_start_s=start_s))
                    for later in bss[i + 1:]:
                        emit(_row(cfg, later, opts, srv, status="failed", server_start_s=start_s,
                                  reason=f"not measured: this configuration failed at batch size {bs} first"))
                    break
                progress.measure_s.append(now() - t1)
                emit(_row(cfg, bs, opts, srv, status="ok", reason=None, server_start_s=start_s,
                          measure_s=now() - t1, **m))
        finally:
            try:
                stop_server(srv)
            except Exception as exc:  # noqa: BLE001 - never let cleanup end the sweep
                print(f"sglang-patches sweep: warning: stopping {name}: {exc}", file=sys.stderr)
    return written
