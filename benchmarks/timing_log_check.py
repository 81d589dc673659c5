"""A timing log against SGLang's own counters, on a live server: requests through /generate, then the
records written meanwhile (request-cycles = sum of meta_info spec_verify_ct; draft + verify + extend
within each cycle). Also the README's main job as written (llama3-8b fixture, port 30000) with that
check on its log. Used by benchmarks/adaptive_bench.py; GPU only.
"""
from __future__ import annotations

import concurrent.futures as cf
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import adaptive_log_checks as achk
from cycle_stats import median_or_none

CHECK_S = 8             # seconds for one counters pass (16 x 64 tokens, then the flush wait)
START_S_MAINJOB = 120   # the main job's server start: default CUDA-graph batch sizes, dummy 8B weights
FLUSH_WAIT_S = 2.5      # the recorder flushes its file every second


def _text(path) -> str:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return ""


def counters_pass(url: str, timing_log: str | None, prompts: list[str], n: int = 16, in_flight: int = 8,
                  max_new: int = 64) -> dict | None:
    """`n` requests of `max_new` tokens, `in_flight` at once: SGLang's spec_verify_ct per request
    against the decode records that started meanwhile; their median phase ms and the requests' mean
    accept length beside."""
    from sglang_patches.offline.sweep.load import generate

    if not timing_log:
        return None
    t_a = time.time()
    with cf.ThreadPoolExecutor(max_workers=in_flight) as pool:
        reqs = list(pool.map(lambda p: generate(url, p, max_new), prompts[:n]))
    t_b = time.time()
    time.sleep(FLUSH_WAIT_S)
    recs = achk.decode_records(achk.records_in_window(_text(timing_log).splitlines(), (t_a, t_b)))
    acc = [q["spec_accept_length"] for q in reqs if q.get("spec_accept_length") is not None]
    return {"window": [t_a, t_b], **achk.counts_check(recs, reqs),
            **{f"{k}_p50": median_or_none([r.get(k) for r in recs]) for k in ("draft_ms", "verify_ms", "extend_ms",
                                                                                 "cycle_ms")},
            "accept_length_mean": round(sum(acc) / len(acc), 3) if acc else None}


def run_mainjob(out_dir: str, seconds_left: float, start_timeout: float) -> str:
    """The README's main job, once (OUT/mainjob/mainjob.json; skipped when it exists)."""
    from sglang_patches.httpjson import http_json
    from sglang_patches.offline.sweep.prompts import load_prompts
    from sglang_patches.offline.sweep.server import Server

    out = Path(out_dir) / "mainjob"
    try:
        if "error" not in json.loads((out / "mainjob.json").read_text()):
            return "done before"
    except (OSError, ValueError):
        pass  # not run yet, or a failed run: run it (again)
    if seconds_left < START_S_MAINJOB + CHECK_S:
        return f"not started: {seconds_left:.0f} s left before --deadline"
    out.mkdir(parents=True, exist_ok=True)
    timing = out / "cycles.jsonl"
    timing.unlink(missing_ok=True)
    srv = Server(["--fixture", "llama3-8b", "--timing-log", str(timing), "--attention-backend", "triton",
                  "--sampling-backend", "pytorch"], port=30000, log_path=str(out / "server.log"))
    res: dict = {"command": " ".join(srv.cmd), "readme_command": "python -m sglang_patches.launch --fixture llama3-8b "
                 "--timing-log cycles.jsonl --attention-backend triton --sampling-backend pytorch"}
    try:
        srv.start().wait_ready(start_timeout)
        res["startup_s"] = round(srv.started_s, 1)
        res["counters"] = counters_pass(srv.url, str(timing), load_prompts())
        st = http_json(srv.url + "/spec_timing", None, timeout=30)
        res["spec_timing_keys"] = sorted(st)[:20] if isinstance(st, dict) else None
        rep = subprocess.run([sys.executable, "-m", "sglang_patches", "report", str(timing), "--json"],
                             capture_output=True, text=True, timeout=120)
        res["report_rc"] = rep.returncode
        c = res["counters"]
        res["ok"] = bool(c["records_equal_verify_ct"] and c["phases_within_cycle_fraction"] == 1.0
                         and rep.returncode == 0)
    except Exception as exc:  # noqa: BLE001 - written down, the benchmark goes on
        res["error"] = f"{type(exc).__name__}: {str(exc)[-600:]}"
        res["ok"] = False
    finally:
        srv.stop()
    tmp = out / f".mainjob.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(res, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, out / "mainjob.json")
    return f"ok={res['ok']}" + (f" ({res.get('error', '')[:200]})" if res.get("error") else "")
