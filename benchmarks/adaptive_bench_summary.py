"""adaptive_bench's summary.json from everything an --out folder holds: each adaptive server's steps
checked against its config (adaptive_log_checks.py), the request counts, the configs and advise's
output, and the run's metadata; then the table (adaptive_report.py) and --export's copy."""
from __future__ import annotations

import json
from pathlib import Path

import adaptive_configs as acfg
import adaptive_log_checks as achk
import adaptive_prompts as aprompts
import adaptive_summary as asum
from adaptive_export import export_run
from adaptive_report import table
from harness.files import read_text, run_meta, write_json


def build_summary(args, cells: dict, configs: dict, env: dict, outcomes: dict) -> dict:
    out = Path(args.out)
    steps_checks, counts_checks = {}, {}
    for f in sorted((out / "starts").glob("*.json")):
        st = json.loads(read_text(f) or "{}")
        if st.get("counters"):
            counts_checks[f.stem] = st["counters"]
        if st.get("kind") != "adaptive" or not st.get("timing_log") or "ready_wall" not in st:
            continue
        try:
            cfg = acfg.load_adaptive_config(st.get("adaptive_config"))
        except (ValueError, OSError) as exc:
            steps_checks[f.stem] = {"error": f"config unreadable: {exc}"}
            continue
        recs = achk.decode_records(read_text(st["timing_log"]).splitlines(), t_from=st["ready_wall"])
        try:  # SGLang's own lines since the server was ready (a byte offset)
            with open(st["server_log"], "rb") as fh:
                fh.seek(int(st.get("ready_log_offset", 0)))
                text = fh.read().decode("utf-8", "replace")
        except OSError:
            text = ""
        steps_checks[f.stem] = achk.steps_check(recs, cfg, text)
    cfgs = {"default": acfg.load_adaptive_config(None)}
    cfgs.update({"zero": json.loads(read_text(out / "configs" / "zero.json"))} if (out / "configs" / "zero.json").exists() else {})
    for pset in asum.SETS:
        p = out / "configs" / f"ours_{pset}.json"
        if p.exists():
            cfgs[f"ours_{pset}"] = json.loads(read_text(p))
        said = read_text(out / "advise" / f"ours_{pset}.txt")  # "$ COMMAND", advise's output, "rc=N"
        if said:
            cfgs[f"ours_{pset}_advise_command"] = said.splitlines()[0][2:]
            cfgs[f"ours_{pset}_advise_output"] = said[-6000:]
    cfgs.update({k: v for k, v in configs.items() if k.endswith("_how")})
    mainjob = json.loads(read_text(out / "mainjob" / "mainjob.json") or "null")
    meta = {**run_meta(env), "sglang_version": env.get("sglang"), "gpu": (env.get("gpus") or [None])[0],
            "outcomes_this_run": outcomes,
            "prompts": {"in": "sglang_patches/data/eval_prompts.jsonl", "ood": aprompts.repo_rel(aprompts.ood_prompts()),
                        "per_cell": {"1": args.prompts_bs1, "8": args.prompts_bs8}, "output_len": args.output_len,
                        "temperature": aprompts.temperature()},
            "graph_bs": list(acfg.GRAPH_BS), "mainjob": mainjob,
            "steps_check_method": achk.steps_check.__doc__.split("\n\n")[0].replace("\n    ", " ")}
    return asum.summarize(cells, configs=cfgs, steps_checks=steps_checks, counts_checks=counts_checks, meta=meta)


def summarize_and_export(args, cells: dict, configs: dict, env: dict, outcomes: dict) -> str:
    """OUT/summary.json (and --export's copy) of everything measured so far; returns the table."""
    path, summary = Path(args.out) / "summary.json", build_summary(args, cells, configs, env, outcomes)
    write_json(path, summary)
    text = table(summary)
    if args.export:
        export_run(Path(args.out), Path(args.export), path, text, args.export_max_mb)
    return text
