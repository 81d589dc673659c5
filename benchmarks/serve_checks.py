"""The overlay's features on a live server of one fixture, on one GPU, for any SGLang the machine has.

Makes the `sglang-0523-gpu` and `kimi-family` figures. Parts, each one server start, run in --parts
order until --deadline; each writes OUT/PART.json as soon as it ends, so a call cut short keeps what
finished:
  timing   the drop-in server with a timing log: requests 1 and 8 in flight; records (entries of
           `accepted`) against SGLang's summed spec_verify_ct, phases within the cycle, /spec_timing,
           `report` (text, --png, --json); without --simulate-acceptance more tokens so the accept-
           collapse alarm's window fills (a dummy drafter accepts nothing: the alarm must fire)
  flagbug  the EAGLE / EAGLE3 flag bug (an EAGLE-3 head served as EAGLE): the launcher's preflight
           must refuse it; with --skip-preflight the in-server hidden-state check must stop the server
  plugin   plain `sglang serve` with SGLANG_PATCHES_ENABLE=1 and a timing log: records vs spec_verify_ct
  fp8      draft-phase GPU ms, stock drafter vs `--draft-backend triton --draft-weights fp8`, batch 1 and 8
  advise   simulated acceptance with --advise-concurrency requests in flight, then `sglang-patches advise` on
           that log twice: verify held flat, and priced by --verify-cost (verify_cost.py's summary); the
           plain steps are that summary's no-speculation steps (--baseline-step-ms BS:MS,...), and the server
           routes experts as its servers did (uniform: SGLang's own switch)
  adaptive --speculative-adaptive started below its largest candidate (SGLang's table, steps 3), then the
           config `advise --adaptive-config` writes from that log: records, steps per bucket (two starts)
GPU only. A part costs one server start (60-150 s) plus 10-40 s of requests.

    python benchmarks/serve_checks.py --out OUT --fixture llama3-8b --parts timing,flagbug,plugin
    python benchmarks/serve_checks.py --out OUT --fixture kimi-k2-mla --simulate-acceptance 0.8,0.7,0.6 \\
        --extra "--mem-fraction-static 0.6 --num-continuous-decode-steps 4 --disable-custom-all-reduce"
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness.files import write_json  # noqa: E402
from serve_checks_summary import summary  # noqa: E402

PARTS = ("timing", "flagbug", "plugin", "fp8", "advise", "adaptive")
START_S = 150          # one server start, JIT kernels compiled, CUDA graphs captured
COMMON = ["--attention-backend", "triton", "--sampling-backend", "pytorch"]
T0 = time.time()


def write(out: Path, name: str, res: dict) -> None:
    write_json(out / f"{name}.json", res)


def grep(path: Path, needle: str, n: int = 3) -> list[str]:
    try:
        return [ln.strip()[:400] for ln in path.read_text(errors="replace").splitlines() if needle in ln][:n]
    except OSError:
        return []


def counters(url: str, timing: Path, prompts: list[str], n: int, in_flight: int, max_new: int = 64) -> dict:
    """timing_log_check.counters_pass: records vs SGLang's spec_verify_ct, phase medians, accept length."""
    from timing_log_check import counters_pass

    return counters_pass(url, str(timing), prompts, n, in_flight, max_new)


def _server(args, flags: list[str], port: int, d: Path, **kw):
    from sglang_patches.offline.sweep.server import Server

    d.mkdir(parents=True, exist_ok=True)
    return Server(["--fixture", args.fixture, *flags, *COMMON, *args.extra_flags], port=port,
                  log_path=str(d / "server.log"), **kw)


def timing(args, out: Path, left: float) -> dict:
    from sglang_patches.httpjson import http_json
    from sglang_patches.offline.sweep.load import generate
    from sglang_patches.offline.sweep.prompts import load_prompts

    d = out / "timing"
    log = d / "cycles.jsonl"
    sim = ["--simulate-acceptance", args.simulate_acceptance] if args.simulate_acceptance else []
    srv = _server(args, ["--timing-log", str(log), *sim], args.port, d)
    res: dict = {"command": shlex.join(srv.cmd)}
    try:
        srv.start().wait_ready(min(left - 30, 300))
        res["startup_s"] = round(srv.started_s, 1)
        prompts = load_prompts()
        res["c1"] = counters(srv.url, log, prompts, 4, 1)
        res["c8"] = counters(srv.url, log, prompts[4:], 16, 8)
        if not sim:  # 8 requests x 320 tokens: every request's window (256 cycles) fills
            with cf.ThreadPoolExecutor(8) as pool:
                list(pool.map(lambda p: generate(srv.url, p, 320), prompts[20:28]))
            time.sleep(2.5)  # the recorder flushes its file every second
        st = http_json(srv.url + "/spec_timing", None, timeout=30)
        body = st.get("spec_timing") if isinstance(st, dict) else None
        res["spec_timing"] = {"accept_length": body.get("accept_length"),
                              "verdict_lines": (body.get("advice") or {}).get("verdict_lines")} \
            if isinstance(body, dict) else None
        res["alarm_lines"] = grep(d / "server.log", "ACCEPT LENGTH COLLAPSE", 1)
    except Exception as exc:  # noqa: BLE001 - written down, the next part goes on
        res["error"] = f"{type(exc).__name__}: {str(exc)[-1500:]}"
    finally:
        srv.stop()
    if log.exists():
        for name, extra in (("report_text", ["--png", str(d / "cycles.png")]), ("report_json", ["--json"])):
            rep = subprocess.run([sys.executable, "-m", "sglang_patches", "report", str(log), *extra],
                                 capture_output=True, text=True, timeout=120)
            res[name + "_rc"] = rep.returncode
            res[name] = (rep.stdout + rep.stderr)[:3000]
    ok = [res.get(c, {}).get("records_equal_verify_ct") and res[c].get("phases_within_cycle_fraction") == 1.0
          for c in ("c1", "c8")]
    res["records_equal_spec_verify_ct"] = all(res.get(c, {}).get("records_equal_verify_ct") for c in ("c1", "c8"))
    res["ok"] = bool(all(ok) and res.get("report_text_rc") == 0 and (sim or res.get("alarm_lines")))
    return res


def flagbug(args, out: Path, left: float) -> dict:
    d = out / "flagbug"
    d.mkdir(parents=True, exist_ok=True)
    bug = ["--fixture", args.fixture, "--speculative-algorithm", "EAGLE", *COMMON, *args.extra_flags]
    t0 = time.time()
    pre = subprocess.run([sys.executable, "-m", "sglang_patches.launch", *bug], capture_output=True, text=True,
                         timeout=120)
    res: dict = {"preflight": {"exit_code": pre.returncode, "seconds": round(time.time() - t0, 2),
                               "stderr_tail": pre.stderr.strip().splitlines()[-3:]}}
    srv = _server(args, ["--speculative-algorithm", "EAGLE", "--skip-preflight"], args.port + 1, d)
    t1 = time.time()
    srv.start()
    code = srv.wait_exit(min(left - 20, 300))
    srv.stop()
    lines = (d / "server.log").read_text(errors="replace").strip().splitlines()
    res["in_server"] = {"exit_code": code, "seconds": round(time.time() - t1, 1),
                        "mismatch_lines": grep(d / "server.log", "HIDDEN-STATE MISMATCH"),
                        "last_lines": [ln[:400] for ln in lines[-3:]]}
    res["refused_preflight"] = pre.returncode != 0 and "SP001" in pre.stderr
    res["caught_in_server"] = code not in (None, 0) and bool(res["in_server"]["mismatch_lines"])
    # the drop-in launcher's own end (deliberate_stop.EXIT_MISMATCH): its one line last, no tree kill by SGLang
    res["ended_in_one_line"] = code == 4 and bool(lines) and lines[-1].startswith(
        "sglang-patches: error: HIDDEN-STATE MISMATCH") and not any("Traceback" in ln for ln in lines)
    return res


def plugin(args, out: Path, left: float) -> dict:
    from sglang_patches.offline.fixtures.model_flags import fixture_flags
    from sglang_patches.offline.fixtures import ensure_fixture
    from sglang_patches.offline.sweep.prompts import load_prompts

    d = out / "plugin"
    log = d / "cycles.jsonl"
    ensure_fixture(args.fixture)
    port = args.port + 2
    env = {"SGLANG_PATCHES_ENABLE": "1", "SGLANG_PATCHES_CONFIG": json.dumps({"timing_log": str(log)})}
    srv = _server(args, [], port, d, env=env)
    srv.cmd = ["sglang", "serve", *fixture_flags(args.fixture, []), *COMMON, *args.extra_flags,
               "--host", "127.0.0.1", "--port", str(port)]
    res: dict = {"command": "SGLANG_PATCHES_ENABLE=1 SGLANG_PATCHES_CONFIG=" + shlex.quote(env["SGLANG_PATCHES_CONFIG"])
                 + " " + shlex.join(srv.cmd)}
    try:
        srv.start().wait_ready(min(left - 20, 300))
        res["startup_s"] = round(srv.started_s, 1)
        res["c8"] = counters(srv.url, log, load_prompts(), 16, 8)
    except Exception as exc:  # noqa: BLE001
        res["error"] = f"{type(exc).__name__}: {str(exc)[-1500:]}"
    finally:
        srv.stop()
    c = res.get("c8") or {}
    res["ok"] = bool(c.get("records_equal_verify_ct") and c.get("phases_within_cycle_fraction") == 1.0)
    return res


def fp8(args, out: Path, left: float) -> dict:
    from sglang_patches.offline.sweep.prompts import load_prompts

    res: dict = {}
    prompts = load_prompts()
    sim = args.simulate_acceptance or "0.9,0.8,0.7"
    for name, extra in (("stock", []), ("triton_fp8", ["--draft-backend", "triton", "--draft-weights", "fp8"])):
        if args.deadline - (time.time() - T0) < START_S:
            res[name] = {"error": "not started: deadline"}
            continue
        d = out / "fp8" / name
        log = d / "cycles.jsonl"
        srv = _server(args, ["--timing-log", str(log), "--simulate-acceptance", sim, *extra], args.port + 3, d)
        cell: dict = {"command": shlex.join(srv.cmd)}
        try:
            srv.start().wait_ready(300)
            cell["startup_s"] = round(srv.started_s, 1)
            counters(srv.url, log, prompts, 8, 8, 32)  # warm-up
            cell["c1"] = counters(srv.url, log, prompts[8:], 4, 1, 128)
            cell["c8"] = counters(srv.url, log, prompts[12:], 16, 8, 128)
        except Exception as exc:  # noqa: BLE001
            cell["error"] = f"{type(exc).__name__}: {str(exc)[-1500:]}"
        finally:
            srv.stop()
        res[name] = cell
    for c in ("c1", "c8"):
        a = (res.get("stock") or {}).get(c, {}).get("draft_ms_p50")
        b = (res.get("triton_fp8") or {}).get(c, {}).get("draft_ms_p50")
        res[f"draft_speedup_{c}"] = round(a / b, 3) if a and b else None
    return res


def advise(args, out: Path, left: float) -> dict:
    from sglang_patches.offline.sweep.load import generate
    from sglang_patches.offline.sweep.prompts import load_prompts

    from moe_routing import routing_env  # benchmarks/, beside this script

    d = out / "advise"
    log = d / "cycles.jsonl"
    sim = args.simulate_acceptance or "0.8,0.7,0.6"
    # the log's verify is priced by the summary's ratios: route its experts as the summary's servers did
    routing = _summary_routing(args.verify_cost)
    srv = _server(args, ["--timing-log", str(log), "--simulate-acceptance", sim], args.port + 4, d,
                  env=routing_env(routing))
    res: dict = {"command": shlex.join(srv.cmd), "concurrency": args.advise_concurrency, "routing": routing}
    try:
        srv.start().wait_ready(min(left - 30, 300))
        res["startup_s"] = round(srv.started_s, 1)
        prompts = load_prompts()
        n = 3 * args.advise_concurrency
        with cf.ThreadPoolExecutor(args.advise_concurrency) as pool:
            list(pool.map(lambda p: generate(srv.url, p, 96), (prompts * n)[:n]))
        time.sleep(2.5)  # the recorder flushes its file every second
    except Exception as exc:  # noqa: BLE001 - written down, the next part goes on
        res["error"] = f"{type(exc).__name__}: {str(exc)[-1500:]}"
    finally:
        srv.stop()
    if log.exists() and args.verify_cost:
        res.update(advise_both_ways(log, args.verify_cost))
    return res


def _summary_routing(spec: str) -> str:
    """The expert routing verify_cost.py's summary was measured under ("model" in summaries before it said)."""
    from sglang_patches.whatif.verify_ratios import load_verify_ratios

    return load_verify_ratios(spec).routing or "model"


def _plain_steps(spec: str) -> dict:
    """{bs: plain decode step ms} of FIXTURE in verify_cost.py's summary SUMMARY (spec SUMMARY:FIXTURE), as
    advise reads them (whatif/verify_ratios.py)."""
    from sglang_patches.whatif.verify_ratios import load_verify_ratios

    return load_verify_ratios(spec).plain_steps


def verify_cost_problem(spec: str | None, concurrency: int) -> str | None:
    """Why the advise part cannot run with this --verify-cost (checked before any server starts), or None."""
    from sglang_patches.errors import UserError

    if concurrency < 1:
        return f"--advise-concurrency {concurrency}: give 1 or more requests in flight"
    if not spec or ":" not in spec:
        return "the advise part needs --verify-cost SUMMARY:FIXTURE (benchmarks/verify_cost.py's summary.json)"
    path, _, fixture = spec.rpartition(":")
    try:
        for one in path.split(","):  # several runs of one fixture join with commas, as advise reads them
            if not isinstance(json.loads(Path(one).read_text()), dict):
                raise TypeError("not an object")
        steps = _plain_steps(spec)  # advise's own reading: the ratio cells and the plain steps
    except UserError as exc:  # advise's own one-line refusal of this summary
        return str(exc)
    except OSError as exc:
        return f"--verify-cost {path}: cannot read it ({exc.strerror or type(exc).__name__}); give verify_cost.py's summary.json"
    except (ValueError, AttributeError, TypeError) as exc:
        return f"--verify-cost {path}: not a verify_cost.py summary.json ({type(exc).__name__}); give its --out's summary.json"
    if not steps:
        return f"--verify-cost {spec}: no plain decode step of fixture {fixture!r} in it; name a fixture it measured"
    return None


def advise_both_ways(log: Path, verify_cost: str) -> dict:
    """`advise LOG --json` with verify held flat and with `--verify-cost SUMMARY:FIXTURE`, both against the plain
    steps the summary measured for FIXTURE (`--baseline-step-ms BS:MS,...`: a logged batch size between two measured
    ones interpolated, one outside them refused). A chain advise names but does not recommend (extrapolated past the
    logged steps: "log a run to price it") counts as named."""
    from sglang_patches.offline.advise_inputs import StepTable

    steps = _plain_steps(verify_cost)
    table = str(StepTable(steps))  # the flag's own text form
    res: dict = {"baseline_steps_ms": {str(bs): round(ms, 4) for bs, ms in sorted(steps.items())}}
    for name, extra in (("flat", []), ("verify_cost", ["--verify-cost", verify_cost])):
        cmd = [sys.executable, "-m", "sglang_patches", "advise", str(log), "--json", "--baseline-step-ms", table, *extra]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            body = json.loads(r.stdout) if r.returncode == 0 else {}
            adv = body.get("advice") or {}
            res[name] = {"rc": r.returncode, "recommended": adv.get("recommended"),
                         "named_unlogged": adv.get("extrapolated_passed_over"),
                         "x_plain": {row["config"]: round(row["ratio_to_no_spec"], 3) for row in adv.get("rows") or []
                                     if row.get("ratio_to_no_spec") is not None},
                         "lines": (r.stdout + r.stderr).strip().splitlines()[-3:] if r.returncode
                         else (body.get("recommendation") or [])[:4]}
        except (subprocess.TimeoutExpired, ValueError) as exc:  # written down: the part's file is still written
            res[name] = {"rc": None, "error": f"{type(exc).__name__}: {str(exc)[-300:]}"}
    ok = all(res[n].get("rc") == 0 for n in ("flat", "verify_cost"))
    res["recommendation_changed"] = (any(res["flat"][k] != res["verify_cost"][k] for k in ("recommended", "named_unlogged"))
                                     if ok else None)
    return res


def adaptive(args, out: Path, left: float) -> dict:
    import serve_checks_adaptive  # benchmarks/, beside this script

    ctx = SimpleNamespace(server=lambda flags, port, d: _server(args, flags, port, d), counters=counters, grep=grep,
                          sim=args.simulate_acceptance or serve_checks_adaptive.SIM, port=args.port + 5)
    return serve_checks_adaptive.run(ctx, out, left, START_S)


SUMMARY_KEYS = ("ok", "error", "records_equal_spec_verify_ct", "refused_preflight", "caught_in_server",
                "draft_speedup_c1", "draft_speedup_c8", "wall_s", "startup_s", "started_below_largest",
                "advised_served", "records_steps_match_fraction")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--out", required=True, help="folder for PART.json files and server logs")
    ap.add_argument("--fixture", default="llama3-8b", help="built-in fixture served (default llama3-8b)")
    ap.add_argument("--parts", default="timing,flagbug", help=f"comma list of {', '.join(PARTS)}")
    ap.add_argument("--simulate-acceptance", default=None, metavar="RATES",
                    help="per-position rates for the timing part (fp8 uses 0.9,0.8,0.7 without it)")
    ap.add_argument("--extra", default="", help="more launcher flags for every server, one string")
    ap.add_argument("--port", type=int, default=30000, help="first port; parts use port .. port+6")
    ap.add_argument("--advise-concurrency", type=int, default=16, help="advise: requests in flight (default 16)")
    ap.add_argument("--verify-cost", default=None, metavar="SUMMARY:FIXTURE",
                    help="advise: benchmarks/verify_cost.py's summary.json and the fixture it measured")
    ap.add_argument("--deadline", type=float, default=540, help="seconds from start; no part starts after")
    ap.add_argument("--summary", choices=("sglang-0523", "kimi-family", "overhead-pair"), default=None,
                    help="run nothing: fold --out's folders, earliest run first (kimi-family: LLAMA_DIR,MLA_DIR pairs) "
                         "into summary.json on stdout; a key takes the first run that measured it (overhead-pair: one "
                         "timing_overhead.py folder of each version, from one machine)")
    import figure_cli  # benchmarks/, beside this script
    figure_cli.declare(ap, figure='the Kimi family and SGLang 0.5.23 rows', folder=('2026-12-06-kimi-family', '2026-12-06-sglang-0523-gpu'),
                       duration='about 10 min (--deadline 540 s; 447 s for four parts on an H100)')
    args = ap.parse_args()
    if args.dry_run:
        return figure_cli.dry_run(out=args.out, servers=[f"{x}: python -m sglang_patches.launch --fixture {args.fixture} {args.extra}".rstrip() for x in args.parts.split(",") if x], notes=[f"first port {args.port}, deadline {args.deadline:.0f} s"])
    if args.summary:
        folders = [Path(x) for x in args.out.split(",")]
        pairs = args.summary == "kimi-family"
        if not folders or (pairs and len(folders) % 2) or not all(f.is_dir() for f in folders):
            print(f"serve_checks: --summary {args.summary} needs --out {'LLAMA_DIR,MLA_DIR[,...]' if pairs else 'DIR[,DIR...]'}"
                  " naming existing result folders, earliest run first", file=sys.stderr)
            return 2
        print(json.dumps(summary(args.summary, folders), indent=1, sort_keys=True))
        return 0
    parts = [p for p in args.parts.split(",") if p]
    bad = [p for p in parts if p not in PARTS]
    if bad or not parts:
        print(f"serve_checks: unknown part {', '.join(bad) or '(none)'}; choose from {', '.join(PARTS)}",
              file=sys.stderr)
        return 2
    problem = verify_cost_problem(args.verify_cost, args.advise_concurrency) if "advise" in parts else None
    if problem:
        print(f"serve_checks: {problem}", file=sys.stderr)
        return 2
    args.extra_flags = shlex.split(args.extra)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from harness.files import run_meta  # benchmarks/, beside this script

    write(out, "versions", run_meta())
    rows = []
    for part in parts:
        left = args.deadline - (time.time() - T0)
        if left < START_S:
            rows.append((part, f"not started: {left:.0f} s left"))
            continue
        t = time.time()
        res = globals()[part](args, out, left)
        res["wall_s"] = round(time.time() - t, 1)
        write(out, part, res)
        rows.append((part, json.dumps({k: v for k, v in res.items() if k in SUMMARY_KEYS})[:400]))
    for part, line in rows:
        print(f"| {args.fixture} | {part} | {line} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
