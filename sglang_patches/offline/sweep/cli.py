"""`sglang-patches sweep`: steps x topk x draft tokens x batch size against no speculation."""
from __future__ import annotations

import argparse
import datetime
import shlex
import subprocess
import sys
from pathlib import Path

from sglang_patches.cliargs import OneLineParser, finite_float, refuse_output_on_input
from sglang_patches.errors import UserError
from sglang_patches.offline.sweep import results as res
from sglang_patches.whatif.grid import config_name, expand_grid, parse_int_list
from sglang_patches.offline.sweep.prompts import DEFAULT_PROMPTS, load_prompts, prompts_digest

DESCRIPTION = """\
Sweep EAGLE-3 speculative decoding settings on one GPU and compare each against no speculation.

One drop-in server (python -m sglang_patches.launch) is started per configuration, one at a time
(SGLang sizes its KV pool from the memory free when it starts). On each, every batch size is
measured: a warm-up run, then --repeats runs with batch-size requests in flight (2 x batch size
greedy requests of --max-new-tokens tokens each, ignore_eos unless --no-ignore-eos; each repeat takes
the next prompts of the list, the same ones for every configuration), reading accept length, per-position
acceptance and the draft/verify/extend phase split from GET /spec_timing (reset before each batch
size). The baseline runs the same launcher with no speculative flags and --patches none.

Grid rules: topk 1 forces draft tokens = steps + 1 in SGLang, so each steps value runs once at topk 1
and other draft-token values are listed as skipped duplicates; for topk > 1, draft tokens must be
at least steps + 1 and at most steps x topk + 1 (and pass preflight rule SP008). Use --dry-run to see the plan.

Output in --out DIR: results.jsonl (one row per configuration x batch size, appended as measured),
summary.md (tables, best configuration per batch size with its speedup, failed and skipped rows),
sweep_tok_s.png, sweep_phases.png, logs/<config>.log (server output), timing/<config>.jsonl (the
phase timer's per-cycle log), sweep.json (settings), plan.json, search.json (--search).
A configuration that fails (out of memory, crash, not healthy within --timeout-per-config, request
timeout) becomes a failed row and the sweep goes on. Exit status: 0 all rows ok, 1 some rows failed,
2 unusable input (one line on stderr), 130 interrupted (rerun with --resume)."""

EPILOG = """\
examples:
  sglang-patches sweep --fixture llama3-1b --steps 1,2,3,5 --topk 1 --batch-sizes 1,16 --out runs/s1
  sglang-patches sweep --model-path /m/target --speculative-draft-model-path /m/eagle3 \\
      --steps 2,4,6 --topk 1,4 --draft-tokens 4,8,16 --batch-sizes 1,8,32 --out runs/s2 --search
  sglang-patches sweep --out runs/s1 --resume ...same flags...   # continue after a crash / Ctrl-C
  sglang-patches sweep --report-only --out runs/s1                # rebuild summary.md and PNGs"""

DEFAULT_SERVER_FLAGS = (("--attention-backend", "triton"), ("--sampling-backend", "pytorch"))
# Flags the sweep sets itself; giving them in --extra-server-args would corrupt the comparison.
RESERVED = ("--host", "--port", "--model-path", "--model", "--speculative-algorithm",
            "--speculative-draft-model-path", "--speculative-draft-model", "--speculative-num-steps",
            "--speculative-eagle-topk", "--speculative-num-draft-tokens", "--timing-log", "--patches",
            "--fixture", "--simulate-acceptance", "--simulate-acceptance-from")


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="sglang-patches sweep", description=DESCRIPTION, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    m = p.add_argument_group("models (a fixture, or a target + drafter directory pair)")
    m.add_argument("--fixture", metavar="NAME", help="model fixture (see `sglang-patches fixtures list`); built into "
                   "the cache on first use")
    m.add_argument("--model-path", metavar="DIR", help="target model directory (with config.json)")
    m.add_argument("--speculative-draft-model-path", metavar="DIR", help="EAGLE-3 drafter directory (with config.json)")
    m.add_argument("--speculative-algorithm", default=None, metavar="ALG",
                   help="default: EAGLE3 (or the fixture's algorithm)")
    m.add_argument("--load-format", default=None, metavar="FMT", help="SGLang --load-format for both models "
                   "(a fixture sets its own, e.g. dummy)")
    g = p.add_argument_group("grid (comma-separated integers)")
    g.add_argument("--steps", default="1,2,3,5", help="--speculative-num-steps values (default: %(default)s)")
    g.add_argument("--topk", default="1,2,4", help="--speculative-eagle-topk values (default: %(default)s)")
    g.add_argument("--draft-tokens", default="2,4,8", help="--speculative-num-draft-tokens values, used for "
                   "topk > 1 (topk 1 always uses steps + 1) (default: %(default)s)")
    g.add_argument("--batch-sizes", default="1,8,32", help="requests in flight (default: %(default)s)")
    r = p.add_argument_group("measurement")
    r.add_argument("--prompts", metavar="FILE", default=None, help="JSONL ({\"prompt\": ...} or {\"text\": ...} per "
                   f"line) or text (one prompt per line); default: the shipped {DEFAULT_PROMPTS.name} "
                   "(20 code + 20 prose prompts)")
    r.add_argument("--max-new-tokens", type=int, default=256, help="tokens per request (default: %(default)s)")
    r.add_argument("--no-ignore-eos", action="store_true", help="let requests stop at end of sequence (default: "
                   "ignore_eos, every request runs --max-new-tokens; past its natural end a small model's text "
                   "tends to repeat itself, which inflates accept length). Greedy, so every configuration still "
                   "generates the same tokens")
    r.add_argument("--repeats", type=int, default=3, help="timed runs per batch size; tok/s is their median "
                   "(default: %(default)s)")
    r.add_argument("--requests-per-batch", type=int, default=2, metavar="N",
                   help="each timed run sends N x batch size requests (default: %(default)s)")
    r.add_argument("--timeout-per-config", type=finite_float, default=600.0, metavar="S",
                   help="seconds for a server to become healthy, and for each request (default: %(default)s)")
    r.add_argument("--simulate-acc-len", type=finite_float, default=None, metavar="X",
                   help="set SGLANG_SIMULATE_ACC_LEN=X for the servers (SGLang then pins acceptance; for "
                   "timing studies with dummy weights)")
    r.add_argument("--simulate-acceptance", default=None, metavar="RATES",
                   help="BENCHMARK ONLY: conditional per-position accept rates (position k accepted given 0..k-1 "
                   "were), e.g. 0.9,0.85,0.8,0.75,0.7; every speculative server gets the launcher's "
                   "--simulate-acceptance with its first `steps` rates (missing positions: 0). topk 1 only")
    r.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                   help="extra environment variable for the servers (repeatable); the sweep's own "
                   "environment is inherited as well")
    r.add_argument("--extra-server-args", default="", metavar="'ARGS'",
                   help="more SGLang server flags, one quoted string. Defaults added unless given here: "
                   "--attention-backend triton --sampling-backend pytorch --cuda-graph-max-bs-decode <max batch size> "
                   "(and --max-running-requests <max batch size> above 48, SGLang's EAGLE default cap)")
    r.add_argument("--profile-seconds", type=finite_float, default=0.0, metavar="S",
                   help="also run `sglang-patches profile` (py-spy + torch profiler + timing window) for S seconds "
                        "per speculative (config, batch size), under load; results in DIR/profiles/ (default: off)")
    o = p.add_argument_group("output and control")
    o.add_argument("--out", metavar="DIR", help="sweep directory (required)")
    o.add_argument("--resume", action="store_true", help="continue the sweep in --out: skip (config, batch size) "
                   "rows already ok in results.jsonl, retry failed ones; the settings must match")
    o.add_argument("--force", action="store_true", help="start over in an --out that holds a sweep (the old "
                   "results.jsonl, sweep.json, logs/ and timing/ are renamed to *.bak-<time>, not deleted)")
    o.add_argument("--search", action="store_true", help="measure a small design (baseline, min/max steps at topk 1, "
                   "the most steps of each topk > 1), fit the cost model, and measure only the predicted best "
                   "(up to --search-top per batch size, within --search-budget); predicted vs measured goes to "
                   "summary.md and search.json")
    o.add_argument("--search-top", type=int, default=2, metavar="N", help="configs per batch size to measure "
                   "after the fit (default: %(default)s)")
    o.add_argument("--search-budget", type=int, default=None, metavar="N", help="speculative configurations the "
                   "search measures in all, its design included (default: a third of the grid's, rounded up, "
                   "and at least the design: 4 of 15 for steps 1,2,3,5 x topk 1,2,4 x draft tokens 2,4,8 "
                   "gives 5)")
    o.add_argument("--shard", metavar="I/N", help="run only every N-th configuration starting at I (0-based; the "
                   "baseline is in shard 0): one shard per GPU, each with its own --out, then --merge them")
    o.add_argument("--merge", nargs="+", metavar="DIR", help="join the shard sweeps DIR... into --out (copies) "
                   "and write the report; nothing is measured")
    o.add_argument("--replay", metavar="DIR", help="with --search: take every measurement the search asks for from "
                   "the grid sweep in DIR instead of starting servers (to check the search's pick against the "
                   "grid's best on the same rows)")
    o.add_argument("--dry-run", action="store_true", help="print the planned and skipped configurations and the "
                   "server command lines, then exit (starts nothing, writes nothing)")
    o.add_argument("--report-only", action="store_true", help="rebuild summary.md and the PNGs from "
                   "--out/results.jsonl and exit")
    return p


def _check_model_dir(path: str, flag: str) -> Path:
    p = Path(path).expanduser()
    if not p.is_dir():
        raise UserError(f"{flag} {path}: no such directory; pass a local model directory (download hub models "
                        f"first, e.g. `huggingface-cli download ORG/NAME --local-dir DIR`)")
    if not (p / "config.json").is_file():
        raise UserError(f"{flag} {path} has no config.json; pass the directory that holds the model's config.json")
    return p.resolve()


def _split_extra(text: str) -> list[str]:
    try:
        extra = shlex.split(text or "")
    except ValueError as exc:
        raise UserError(f"--extra-server-args {text!r}: {exc}; quote it as one shell string") from None
    for a in extra:
        for flag in RESERVED:
            if a == flag or a.startswith(flag + "="):
                raise UserError(f"--extra-server-args must not contain {flag}: the sweep sets it itself "
                                f"(use the sweep's own option, if any)")
    return extra


def server_flags(extra: list[str], max_bs: int) -> list[str]:
    def given(*names):
        return any(a == n or a.startswith(n + "=") for a in extra for n in names)
    flags: list[str] = []
    for flag, value in DEFAULT_SERVER_FLAGS:
        if not given(flag):
            flags += [flag, value]
    if not given("--cuda-graph-max-bs", "--cuda-graph-max-bs-decode", "--disable-cuda-graph"):
        from sglang_patches import compat
        flags += [compat.current().FLAG_CUDA_GRAPH_MAX_BS, str(max_bs)]  # the spelling this SGLang parses
    if max_bs > 48 and not given("--max-running-requests"):
        flags += ["--max-running-requests", str(max_bs)]
    return flags + extra


def _env(args) -> dict:
    env = {}
    for item in args.env:
        key, sep, value = item.partition("=")
        if not sep or not key or not key.replace("_", "").isalnum():
            raise UserError(f"--env {item!r}: expected KEY=VALUE")
        env[key] = value
    if args.simulate_acc_len is not None:
        if args.simulate_acc_len <= 0:  # SGLang clamps to [1, steps + 1]; below 1 shapes its sampled methods
            raise UserError(f"--simulate-acc-len {args.simulate_acc_len}: must be > 0")
        env["SGLANG_SIMULATE_ACC_LEN"] = str(args.simulate_acc_len)
    if args.profile_seconds < 0:
        raise UserError(f"--profile-seconds {args.profile_seconds}: must be >= 0 (0 = no profiling)")
    return env


def _gpu_name() -> str:
    try:  # not torch: a CUDA context in this process would take GPU memory from the servers
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=15)
        names = [ln.strip() for ln in out.stdout.splitlines() if ln.strip()]
        return ", ".join(names) if names else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _models(args, dry_run: bool, before_build=None):
    """(model_flags, spec_flags, description dict); nothing is built in a dry run. `before_build()`: a
    check to pass before a fixture is built (a refused run leaves the fixture cache alone)."""
    if args.fixture and (args.model_path or args.speculative_draft_model_path):
        raise UserError("give either --fixture or --model-path + --speculative-draft-model-path, not both")
    if args.fixture:
        from sglang_patches.offline.fixtures import ensure_fixture, fixture_cache_dir
        from sglang_patches.offline.fixtures.specs import get_spec
        spec = get_spec(args.fixture)
        if dry_run:
            root = fixture_cache_dir() / args.fixture
            target, draft, fmt, algo = root / "target", root / "draft", spec.load_format, spec.algorithm
        else:
            if before_build is not None:
                before_build()
            fx = ensure_fixture(args.fixture)
            target, draft, fmt, algo = fx.target, fx.draft, fx.load_format, fx.algorithm
    else:
        if not args.model_path or not args.speculative_draft_model_path:
            raise UserError("give --fixture NAME, or both --model-path DIR and --speculative-draft-model-path DIR")
        target = _check_model_dir(args.model_path, "--model-path")
        draft = _check_model_dir(args.speculative_draft_model_path, "--speculative-draft-model-path")
        fmt, algo = None, "EAGLE3"
    fmt = args.load_format or fmt
    algo = (args.speculative_algorithm or algo).upper()
    model_flags = ["--model-path", str(target)] + (["--load-format", fmt] if fmt else [])
    spec_flags = ["--speculative-algorithm", algo, "--speculative-draft-model-path", str(draft)]
    return model_flags, spec_flags, {"target": str(target), "draft": str(draft), "algorithm": algo, "load_format": fmt}


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(list(argv))
    if not args.out and not args.dry_run:
        raise UserError("--out DIR is required (the sweep directory)")
    if args.out:  # before anything is read or written: an input is never the output
        refuse_output_on_input(args.out, "--out", [("--replay", args.replay), ("--prompts", args.prompts),
                                                   ("--model-path", args.model_path),
                                                   ("--speculative-draft-model-path", args.speculative_draft_model_path),
                                                   *(("--merge", d) for d in args.merge or ())])
    from sglang_patches.offline.sweep import merge as mg
    if args.report_only:
        from sglang_patches.offline.sweep.table import write_report
        write_report(args.out)
        return 0
    if args.merge and args.dry_run:
        raise UserError("--merge writes the merged sweep; --dry-run writes nothing, so drop one of them")
    if args.merge:
        from sglang_patches.offline.sweep.table import write_report
        out = mg.merge(args.merge, args.out, force=args.force)
        write_report(out)
        print(f"sglang-patches sweep: merged {len(args.merge)} shards into {out}; report in {out / 'summary.md'}")
        return 0
    shard = mg.parse_shard(args.shard)
    if shard and args.search:
        raise UserError("--shard and --search cannot be combined: the search decides its runs from all earlier ones")
    if args.replay and not args.search:
        raise UserError("--replay DIR needs --search (it replays the search's runs on the grid measured in DIR)")
    for flag, v in (("--max-new-tokens", args.max_new_tokens), ("--repeats", args.repeats),
                    ("--requests-per-batch", args.requests_per_batch), ("--search-top", args.search_top),
                    ("--search-budget", 1 if args.search_budget is None else args.search_budget)):
        if v < 1:
            raise UserError(f"{flag} {v}: must be at least 1")
    if not args.timeout_per_config > 0:
        raise UserError(f"--timeout-per-config {args.timeout_per_config}: must be > 0 seconds")
    steps = parse_int_list(args.steps, "--steps")
    topks = parse_int_list(args.topk, "--topk")
    ndts = parse_int_list(args.draft_tokens, "--draft-tokens")
    bss = parse_int_list(args.batch_sizes, "--batch-sizes")
    plan = expand_grid(steps, topks, ndts)
    sim_rates = _simulated_rates(args, topks)
    if args.replay:
        return _replay(args, plan, bss, argv)
    extra = _split_extra(args.extra_server_args)
    env = _env(args)
    prompts = load_prompts(args.prompts)
    flags = server_flags(extra, max(bss))
    from sglang_patches.launch import check_gpu  # every server would fail to start without one: said once

    gpu_check = (lambda: check_gpu(flags))  # before a fixture is built, else before --out is written
    model_flags, spec_flags, models = _models(args, args.dry_run, before_build=gpu_check)

    from sglang_patches.offline.sweep.runner import RunOptions, run_configs, server_args
    opts = RunOptions(out_dir=str(Path(args.out).expanduser().absolute()) if args.out else "OUT", model_flags=model_flags, spec_flags=spec_flags,
                      server_flags=flags, batch_sizes=bss, prompts=prompts, max_new_tokens=args.max_new_tokens,
                      repeats=args.repeats, timeout=args.timeout_per_config,
                      requests_per_bs=args.requests_per_batch, env=env, profile_seconds=args.profile_seconds,
                      ignore_eos=not args.no_ignore_eos, simulate_rates=sim_rates)
    if args.dry_run:
        print(plan.describe())
        if shard:
            print(f"shard {shard[0]}/{shard[1]}: runs " + ", ".join(map(config_name, mg.shard_configs(plan.configs, shard))))
        print(f"batch sizes {', '.join(map(str, bss))}; {len(prompts)} prompts; "
              f"{len(plan.configs)} servers x {len(bss)} batch sizes = {len(plan.configs) * len(bss)} rows"
              + (" (--search measures only a subset)" if args.search else ""))
        if args.search:
            from sglang_patches.whatif import cost_model as cm

            design = [c for c in cm.design(plan) if c is not None]
            budget = cm.search_budget(plan, args.search_budget)
            print(f"--search: the baseline and the design {', '.join(map(config_name, design))}, then up to "
                  f"{budget - len(design)} predicted best: at most {budget} of the {len(plan.speculative)} "
                  "speculative configurations")
        env_s = " ".join(f"{k}={v}" for k, v in env.items())
        for cfg in plan.configs:
            cmd = ["python", "-m", "sglang_patches.launch", *server_args(cfg, opts)]
            print(f"  {config_name(cfg)}: {(env_s + ' ') if env_s else ''}{shlex.join(cmd)}")
        return 0

    from sglang_patches.server.hooks import installed_sglang_version
    manifest = {**models, "max_new_tokens": args.max_new_tokens, "prompts_sha256": prompts_digest(prompts),
                "prompts_file": str(args.prompts or DEFAULT_PROMPTS), "simulate_acc_len": args.simulate_acc_len,
                "simulate_acceptance": sim_rates,
                "ignore_eos": not args.no_ignore_eos,
                "extra_server_args": extra, "env": env, "batch_sizes": bss, "repeats": args.repeats,
                "grid": {"steps": steps, "topk": topks, "draft_tokens": ndts}, "server_flags": flags,
                "created": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
                **({"shard": args.shard} if shard else {})}
    out = res.prepare_out_dir(opts.out_dir, resume=args.resume, force=args.force, manifest=manifest,
                              last_check=None if args.fixture else gpu_check)
    res.write_json(out / res.PLAN, plan.to_dict())
    opts.meta = {"command": "sglang-patches sweep " + shlex.join(argv), "sglang_version": installed_sglang_version(),
                 "gpu": _gpu_name(), "target": models["target"], "draft": models["draft"],
                 "simulate_acc_len": args.simulate_acc_len, "simulate_acceptance": sim_rates, "env": env}
    if args.search:
        from sglang_patches.offline.sweep.search import run_search
        run_search(plan, out, lambda cfgs: run_configs(cfgs, opts), per_bs=args.search_top,
                   budget=args.search_budget)
    else:
        run_configs(mg.shard_configs(plan.configs, shard), opts)
    from sglang_patches.offline.sweep.table import write_report
    write_report(out)
    latest = res.latest_rows(res.read_rows(out)).values()
    return 1 if any(r.get("status") != "ok" for r in latest) else 0


def _simulated_rates(args, topks: list[int]) -> list[float] | None:
    if args.simulate_acceptance is None:
        return None
    from sglang_patches.vocab.rates import parse_rates

    rates = parse_rates(args.simulate_acceptance)
    if args.simulate_acc_len is not None:
        raise UserError("--simulate-acceptance and --simulate-acc-len both given; choose one simulation")
    if any(k != 1 for k in topks):
        raise UserError(f"--simulate-acceptance is defined for chains (topk 1); got --topk {args.topk}: use --topk 1")
    return rates


def _replay(args, plan, bss, argv) -> int:
    from sglang_patches.offline.sweep import merge as mg
    from sglang_patches.offline.sweep.search import run_search
    from sglang_patches.offline.sweep.table import write_report
    grid = Path(args.replay)
    if not grid.is_dir():
        raise UserError(f"--replay {args.replay}: no such directory; give the directory of a measured grid sweep")
    manifest = res.read_manifest(grid, required=True)
    grid_rows = res.read_rows(grid)  # every row valid before --out is touched
    if not grid_rows:
        raise UserError(f"--replay {args.replay}: no rows in {res.RESULTS}; give the directory of a measured grid sweep")
    have = {r["config"] for r in grid_rows}  # every configuration the search may ask for, before --out exists
    missing = [n for n in dict.fromkeys(map(config_name, plan.configs)) if n not in have]
    if missing:
        raise UserError(f"--replay: {args.replay} has no row for {', '.join(missing[:4])}"
                        f"{f' (+{len(missing) - 4} more)' if len(missing) > 4 else ''}; run the grid with the same "
                        "--steps/--topk/--draft-tokens first, or replay with that grid's values")
    typed_parser = build_parser()  # which of these flags were typed (argparse's abbreviations included)
    typed_parser.set_defaults(max_new_tokens=None, batch_sizes=None, repeats=None)
    typed = typed_parser.parse_args(list(argv))
    given = {"max_new_tokens": ("--max-new-tokens", args.max_new_tokens, typed.max_new_tokens),
             "batch_sizes": ("--batch-sizes", bss, typed.batch_sizes), "repeats": ("--repeats", args.repeats, typed.repeats)}
    def shown(v):
        return ",".join(map(str, v)) if isinstance(v, list) else v
    differ = [f"{flag} {shown(v)} (the grid ran {shown(manifest[k])})"
              for k, (flag, v, was_typed) in given.items() if was_typed is not None and k in manifest and manifest[k] != v]
    out = res.prepare_out_dir(Path(args.out), resume=False, force=args.force,
                              manifest={**manifest, "replayed_from": str(grid)})
    if differ:  # nothing is measured: every row is the grid's, as it ran
        print(f"sglang-patches sweep: note: --replay copies {args.replay}'s rows as measured; not applied: "
              f"{'; '.join(differ)}", file=sys.stderr)
    res.write_json(out / res.PLAN, plan.to_dict())
    summary = run_search(plan, out, mg.replayer(str(grid), out), per_bs=args.search_top, budget=args.search_budget,
                         grid_rows=grid_rows)
    res.write_json(out / res.SEARCH, {**summary, "replayed_from": str(grid)})
    vs, err = summary.get("versus_grid", []), summary.get("model_error_on_grid", {})
    if err.get("rows"):
        print(f"sglang-patches sweep: search: the design-only model's error on the {err['rows']} grid rows "
              f"outside the design: median {100 * err['median_abs_error']:.1f} %, max {100 * err['max_abs_error']:.1f} %")
    for v in vs:
        print(f"sglang-patches sweep: search vs grid: bs {v['batch_size']} {v['kind']}: search picked "
              f"{v['search_pick']}, grid best {v['grid_best']}: {v['ratio']:.3f} of the grid's best "
              f"({'within' if v['within_3pct'] else 'NOT within'} 3 %)")
    write_report(out)
    return 0
