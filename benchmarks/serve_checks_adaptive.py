"""serve_checks.py's `adaptive` part: SGLang's --speculative-adaptive under the launcher, twice.

Server A: SGLang's built-in adaptive table (candidates up to steps 7) started at the fixture's steps 3,
below its largest candidate. 0.5.17 sizes its CUDA graphs' shared logits buffer from the start and
cannot serve that (the launcher refuses it in one line); on a version whose compat says it can, the
server must start and serve. Then `sglang-patches advise A_LOG --adaptive-config` writes a config, and
server B serves it with the start flags advise printed. On each server: requests 1 and 8 in flight,
records against SGLang's summed spec_verify_ct, and every record's steps among the candidates of the
bucket SGLang routes its batch to (adaptive_log_checks.steps_check, with SGLang's switch lines).
Acceptance is simulated (the part's --simulate-acceptance rates, 3 positions): past steps 3 a position
accepts nothing, so the table's longer candidates cost without paying and the switches show.
"""
from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

import adaptive_configs as acfg
import adaptive_log_checks as achk

GRAPH_BS = ["--cuda-graph-bs-decode", *map(str, acfg.GRAPH_BS)]  # the batch sizes steps_check routes by
SIM = "0.9,0.8,0.7"


def _serve(ctx, name: str, flags: list[str], cfg_path: str | None, port: int, out: Path, left: float) -> dict:
    from sglang_patches import compat
    from sglang_patches.offline.sweep.prompts import load_prompts

    d = out / "adaptive" / name
    log = d / "cycles.jsonl"
    srv = ctx.server(["--timing-log", str(log), "--simulate-acceptance", ctx.sim, "--speculative-adaptive",
                      *flags, *GRAPH_BS], port, d)
    res: dict = {"command": shlex.join(srv.cmd), "adaptive_config": cfg_path,
                 "buffers_from_start": compat.current().ADAPTIVE_BUFFERS_FROM_START}
    t_ready = None
    try:
        srv.start().wait_ready(min(left - 30, 300))
        res["startup_s"], t_ready = round(srv.started_s, 1), time.time()
        prompts = load_prompts()
        res["c1"] = ctx.counters(srv.url, log, prompts, 4, 1, 96)
        res["c8"] = ctx.counters(srv.url, log, prompts[4:], 16, 8, 96)
    except Exception as exc:  # noqa: BLE001 - written down: whether it started is the finding
        res["error"] = f"{type(exc).__name__}: {str(exc)[-1500:]}"
        res["server_log_errors"] = ctx.grep(d / "server.log", "Error", 6)
    finally:
        srv.stop()
    res["started"] = t_ready is not None
    if t_ready is not None and log.exists():
        recs = achk.decode_records(log.read_text(errors="replace").splitlines(), t_from=t_ready)
        text = (d / "server.log").read_text(errors="replace") if (d / "server.log").exists() else ""
        cfg = acfg.load_adaptive_config(cfg_path)
        res["candidates_as_loaded"] = {k: e.get("candidate_steps") for k, e in cfg.items() if isinstance(e, dict)}
        res["steps_check"] = achk.steps_check(recs, cfg, text)
    res["records_equal_spec_verify_ct"] = bool(res.get("c1") and res.get("c8") and all(
        res[c].get("records_equal_verify_ct") for c in ("c1", "c8")))
    res["log"] = str(log)
    return res


def adaptive_config(log: Path, cfg: Path) -> tuple[list[str] | None, dict]:
    """advise --adaptive-config on server A's log: the flags it prints (start included) and what it said."""
    rep = subprocess.run([sys.executable, "-m", "sglang_patches", "advise", str(log), "--adaptive-config", str(cfg),
                          "--json"], capture_output=True, text=True, timeout=180)
    info: dict = {"rc": rep.returncode, "stderr": rep.stderr[-800:]}
    try:
        body = json.loads(rep.stdout)
    except ValueError:
        info["stdout"] = rep.stdout[-800:]
        return None, info
    info.update(verdict_lines=body.get("verdict_lines"), lines=body.get("lines"), server_flags=body.get("server_flags"))
    flags = [f for f in body.get("server_flags") or [] if f != "--speculative-adaptive"]
    return (flags if rep.returncode == 0 and cfg.exists() else None), info


def run(ctx, out: Path, left: float, start_s: float) -> dict:
    t0 = time.time()
    res: dict = {"default_below_largest": _serve(ctx, "default_start3", [], None, ctx.port, out, left)}
    a = res["default_below_largest"]
    res["started_below_largest"] = a["started"]
    if a["started"] and Path(a["log"]).exists():
        flags, res["advise"] = adaptive_config(Path(a["log"]), out / "adaptive" / "advised.json")
        rest = left - (time.time() - t0)
        if flags and rest > start_s:
            res["advised"] = _serve(ctx, "advised", flags, str(out / "adaptive" / "advised.json"), ctx.port + 1,
                                    out, rest)
        elif flags:
            res["advised"] = {"error": f"not started: {rest:.0f} s left"}
    fr = [s["steps_check"]["fraction"] for s in (a, res.get("advised") or {})
          if isinstance(s.get("steps_check"), dict) and s["steps_check"].get("fraction") is not None]
    res["records_steps_match_fraction"] = min(fr) if fr else None
    paths = [s["steps_check"].get("switch_path_consistent") for s in (a, res.get("advised") or {})
             if isinstance(s.get("steps_check"), dict)]
    res["switch_path_consistent"] = all(paths) if paths else None
    res["records_equal_spec_verify_ct"] = a["records_equal_spec_verify_ct"] and (
        (res.get("advised") or {}).get("records_equal_spec_verify_ct", True))
    res["advised_served"] = (res.get("advised") or {}).get("started")  # None: advise wrote none, or no time left
    res["ok"] = bool(res["started_below_largest"] and res["advised_served"] and res["records_equal_spec_verify_ct"]
                     and res["records_steps_match_fraction"] == 1.0 and res["switch_path_consistent"])
    return res
