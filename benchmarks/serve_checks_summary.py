"""summary.json of the figures benchmarks/serve_checks.py makes (`--summary`): the part files of each call,
folded earliest first; a key takes the first run that measured it, what no run measured stays null."""
from __future__ import annotations

import json
import lzma
from pathlib import Path

import adaptive_log_checks as achk  # benchmarks/, beside this module
from sglang_patches.whatif.verify_ratios import load_verify_ratios


def _load(folder: Path, part: str) -> dict:
    try:
        return json.loads((folder / f"{part}.json").read_text())
    except (OSError, ValueError):
        return {}


def _share(t: dict):
    return (t.get("c1") or {}).get("phases_share_of_cycle_p50")


def _version(folder: Path) -> str | None:
    v = _load(folder, "versions")  # run_meta's header ("env"); files before it held "versions"
    s = _load(folder, "summary")  # adaptive_bench's, or verify_cost.py's (its env)
    return ((v.get("env") or v.get("versions") or {}).get("sglang") or s.get("sglang_version")
            or (s.get("env") or {}).get("sglang") or (_load(folder, "timing_overhead").get("env") or {}).get("sglang")
            or next((r.get("sglang_version") for r in map(_read, sorted(folder.glob("fp8_draft_run_*.json")))
                     if r.get("sglang_version")), None))


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _alarm(t: dict):
    """Whether the accept-collapse alarm fired in a timing part run without simulated acceptance (the dummy
    drafter accepts nothing: it must); None for a simulated run, where it is off by design, or a part whose
    command was not kept."""
    if not t.get("command") or any(x in t["command"] for x in ("--simulate-acceptance", "SIMULATE_ACC")):  # no command:
        return None  # (no command: a part rebuilt from a table line)
    return bool(t.get("alarm_lines"))


def _kimi_keys(llama: Path, mla: Path) -> dict:
    lt, mt = _load(llama, "timing"), _load(mla, "timing")
    lf, mf = _load(llama, "flagbug"), _load(mla, "flagbug")
    s = {"records_equal_spec_verify_ct_llama_head": lt.get("records_equal_spec_verify_ct"),
         "records_equal_spec_verify_ct_mla_head": mt.get("records_equal_spec_verify_ct"),
         "phase_share_p50_llama_head": _share(lt), "phase_share_p50_mla_head": _share(mt),
         "flag_bug_refused_preflight": (lf.get("refused_preflight") and mf.get("refused_preflight"))
         if lf and mf else lf.get("refused_preflight", mf.get("refused_preflight")),
         "flag_bug_caught_in_server_llama_head": lf.get("caught_in_server"),
         "flag_bug_caught_in_server_mla_head": mf.get("caught_in_server"),
         "fp8_draft_speedup_bs1_llama_head": _load(llama, "fp8").get("draft_speedup_c1"),
         "alarm_fired_llama_head": _alarm(lt), "alarm_fired_mla_head": _alarm(mt)}
    # verify_cost.json: benchmarks/verify_cost.py's summary.json of this fixture (gpu_plans/moe_verify_physics.sh)
    vc = _load(llama, "verify_cost").get("verify_over_step_by_fixture") or {}
    ratios = vc.get("kimi-k2-mla") if isinstance(vc.get("kimi-k2-mla"), dict) else {}
    # expert_spread.json: benchmarks/moe_expert_spread.py's summary.json (SGLang's recorder: measured counts);
    # verify_cost.json's distinct experts are expected values and never land here
    spread = _load(llama, "expert_spread")
    by_t = {r.get("tokens"): r.get("distinct_mean") for r in spread.get("rows") or [] if isinstance(r, dict)}
    for t in (1, 4, 8):
        s[f"distinct_experts_per_layer_bs1_T{t}"] = by_t.get(t)
    s["distinct_experts_routing"] = spread.get("routing") if any(by_t.get(t) for t in (1, 4, 8)) else None
    # expert_spread_384_*.json: the same on kimi-k25-384-int4, split over calls (a row per T that ran)
    rows384 = [r for f in sorted(llama.glob("expert_spread_384_*.json")) for r in _load(f.parent, f.stem).get("rows") or []]
    by384 = {r.get("tokens"): r.get("distinct_mean") for r in rows384 if isinstance(r, dict) and r.get("passes")}
    for t in (1, 4, 8):
        s[f"distinct_experts_per_layer_384_bs1_T{t}"] = by384.get(t)
    # verify_cost_384_*.json: the same measurement on kimi-k25-384-int4 (all 384 experts, INT4), split over calls,
    # joined as `advise --verify-cost A.json,B.json` joins them (each verify over the first call's plain step)
    parts = sorted(llama.glob("verify_cost_384_*.json"), key=lambda f: json.loads(f.read_text()).get("date") or "")
    r384 = load_verify_ratios(",".join(map(str, parts))).table if parts else {}
    for bs in (1, 16):
        for t in (2, 4, 8):
            row = ratios.get(str(bs))
            s[f"verify_over_decode_bs{bs}_T{t}"] = row.get(str(t)) if isinstance(row, dict) else None
            s[f"verify_over_decode_384_int4_bs{bs}_T{t}"] = _round(r384.get(bs, {}).get(t))
    return s


def _0523_keys(f: Path) -> dict:
    t, fb = _load(f, "timing"), _load(f, "flagbug")
    return {"main_job_ok": t.get("ok"), "records_equal_spec_verify_ct": t.get("records_equal_spec_verify_ct"),
            "phase_share_p50": _share(t), "flag_bug_caught_in_server": fb.get("caught_in_server"),
            "plugin_ok": _load(f, "plugin").get("ok"),
            "fp8_draft_speedup_bs1_llama3_8b": _load(f, "fp8").get("draft_speedup_c1"),
            "adaptive_records_steps_match_fraction": _steps_match(_bench(f, "0.5.23")), **_adaptive_part_keys(f),
            **_overhead_keys(f), **_fp8_accept_keys(f), **_step_timing_keys(f), **{k: None for k in PAIR_KEYS}}


def _adaptive_part_keys(f: Path) -> dict:
    """serve_checks' adaptive part: SGLang's table started below its largest candidate, then advise's config.
    The switch path is checked again here from the returned timing log (cycles.jsonl.xz, the part's traffic
    from its first window on) and SGLang's switch lines (server-switches.txt), by the current rule."""
    a = _load(f, "adaptive")
    first = a.get("default_below_largest") or {}
    path = None
    if (f / "cycles.jsonl.xz").exists() and (f / "server-switches.txt").exists() and (first.get("c1") or {}).get("window"):
        recs = achk.decode_records(lzma.open(f / "cycles.jsonl.xz", "rt").read().splitlines(), t_from=first["c1"]["window"][0])
        path = achk.path_ok(achk.steps_runs(recs), achk.switch_states((f / "server-switches.txt").read_text()))
    return {"adaptive_started_below_largest": a.get("started_below_largest"),
            "adaptive_advised_config_served": (a.get("advised") or {}).get("started"),  # null: not started (deadline)
            "adaptive_part_records_steps_match_fraction": _round(a.get("records_steps_match_fraction")),
            "adaptive_part_switch_path_consistent": path}


def _fp8_accept_keys(f: Path) -> dict:
    """fp8_draft_bench.py's merged summary.json of trained-8b s3 stock vs triton_fp8 on one build (greedy accept
    pass, and bench_serving's at concurrency 1 and 8): accept length FP8 / stock."""
    s = _load(f, "summary") if any(f.glob("fp8_draft_run_*.json")) else {}
    return {"fp8_accept_ratio_trained_8b_s3": _round(s.get("accept_ratio_trained_8b_s3")),
            "fp8_accept_ratio_bench_serving_c1_trained_8b_s3": _round(s.get("accept_ratio_bench_serving_bs1_trained_8b_s3")),
            "fp8_accept_ratio_bench_serving_c8_trained_8b_s3": _round(s.get("accept_ratio_bench_serving_bs8_trained_8b_s3"))}


def _step_timing_keys(f: Path) -> dict:
    """verify_cost.py's summary.json: the overlay's step_timing feature (plain decode steps timed on the GPU) on a
    no-speculation server, against the wall clock of the same steps, at batch 1 and 16."""
    s = _load(f, "summary")
    rows = [r for r in s.get("rows") or [] if isinstance(r, dict) and r.get("draft_tokens") is None]  # plain servers
    rows = [r for r in rows if r.get("step_ms") and r.get("fixture") == rows[0].get("fixture")]
    out = {"step_timing_ok": True if rows else None}
    for bs in (1, 16):
        row = next((r for r in rows if r.get("bs") == bs and r.get("step_wall_ms")), None)
        out[f"step_timing_over_wall_bs{bs}"] = _round(row["step_ms"] / row["step_wall_ms"]) if row else None
    return out


def _overhead_keys(f: Path, version: str = "0.5.23") -> dict:
    """benchmarks/timing_overhead.py's timing_overhead.json of a server pair of one SGLang version
    (gpu_plans/sglang_0523_overhead.sh): end-to-end ON/OFF (the median of the paired repeats, with its bootstrap
    interval), steady cycles OFF/ON, and whether `sglang-patches profile` completed at every batch size it ran."""
    d = _load(f, "timing_overhead")
    if (d.get("env") or {}).get("sglang") != version:
        d = {}
    out = {}
    for bs in (1, 16):
        o, sd = (d.get("overhead") or {}).get(str(bs)) or {}, (d.get("steady_decode") or {}).get(str(bs)) or {}
        out[f"overhead_ratio_bs{bs}"] = _round(o.get("paired_ratio_median"))
        out[f"overhead_ratio_ci95_bs{bs}"] = [_round(x) for x in o["paired_ratio_ci95"]] if o.get("paired_ratio_ci95") else None
        out[f"steady_cycle_off_over_on_bs{bs}"] = _round(sd.get("ratio"))
    prof = [p for p in (d.get("profile") or {}).values() if isinstance(p, dict)]
    out["profile_ok"] = all(p.get("complete") and p.get("exit_code") == 0 for p in prof) if prof else None
    return out


def _round(x):
    return round(x, 4) if isinstance(x, (int, float)) else None


# The version pair: benchmarks/adaptive_bench.py's exports (gpu_plans/sglang_pair.sh), one folder per version, on
# one trained-8b build; the `in` set (held-out stdlib prompts), bench_serving at concurrency 1 and 8.
PAIR_KEYS = {f"{key}_tok_s_0523_over_0517_c{c}": f"{row}_in_bs{c}" for key, row in (("plain", "plain"), ("eagle3_s3", "s3"))
             for c in (1, 8)}


def _steps_match(bench: dict):
    """An adaptive export's records-steps match fraction, None where it held no adaptive records."""
    return bench.get("records_steps_match_fraction") if bench.get("records_steps_match_records") else None


def _bench(f: Path, version: str) -> dict:
    s = _load(f, "summary")
    return s if isinstance(s.get("tok_s"), dict) and s.get("sglang_version") == version else {}


def _pair_keys(folders: list[Path]) -> tuple[dict, list[Path], str | None]:
    """(ratio keys, the two folders they came from, why none) from the first export of each version."""
    old = next(((f, s) for f in folders if (s := _bench(f, "0.5.17"))), None)
    new = next(((f, s) for f in folders if (s := _bench(f, "0.5.23"))), None)
    if old is None or new is None:
        return {}, [], None
    builds = [set(s.get("fixture_builds") or []) for _, s in (old, new)]
    if not builds[0] or len(builds[0]) != 1 or builds[0] != builds[1]:
        # a ratio across two trained-8b builds compares two drafters, not two SGLang versions
        return {}, [], f"trained-8b builds {sorted(builds[0])} vs {sorted(builds[1])}: one and the same build needed"
    out = {}
    for key, cell in PAIR_KEYS.items():
        a, b = old[1]["tok_s"].get(cell), new[1]["tok_s"].get(cell)
        if a and b:
            out[key] = round(b / a, 4)
    return out, [old[0], new[0]], None


def _overhead_pair(folders: list[Path]) -> dict:
    """The overhead pair of both versions on one machine: one folder of 0.5.17 and one of 0.5.23 (any order), each
    with a timing_overhead.json; every key suffixed with its version, null where that version's file is missing.
    `same_gpu` says whether both ran on the GPU named (a ratio across machines would compare no pair)."""
    out, gpus, source = {}, {}, {}
    env = {f: _load(f, "timing_overhead").get("env") or {} for f in folders}
    for version in ("0.5.17", "0.5.23"):
        f = next((f for f in folders if env[f].get("sglang") == version), None)
        keys = _overhead_keys(f, version) if f else {}
        tag = version.replace(".", "")  # 0517, 0523
        for k in ("overhead_ratio_bs1", "overhead_ratio_bs16", "overhead_ratio_ci95_bs1", "overhead_ratio_ci95_bs16",
                  "steady_cycle_off_over_on_bs1", "steady_cycle_off_over_on_bs16", "profile_ok"):
            out[f"{k}_{tag}"] = keys.get(k)
            if keys.get(k) is not None:
                source[f"{k}_{tag}"] = f"{f} (sglang {version})"
        if f:
            gpus[version] = env[f].get("gpus") or None
    both = list(gpus.values())
    out["same_gpu"] = len(both) == 2 and both[0] is not None and both[0] == both[1]
    out["gpu"] = both[0][0] if out["same_gpu"] else None  # two machines (or unknown): no one GPU to name
    out["key_runs"] = source
    return out


def summary(figure: str, folders: list[Path]) -> dict:
    """summary.json of a figure from the OUT folders of its calls, earliest first (kimi-family: LLAMA,MLA
    pairs; overhead-pair: one folder per version). A key takes the first run that measured it; what no run
    measured stays null. `key_runs` names the folder (and its SGLang version) each measured key came from."""
    if figure == "overhead-pair":
        return _overhead_pair(folders)
    runs = ([(f"{folders[i]},{folders[i + 1]}", _version(folders[i]), _kimi_keys(folders[i], folders[i + 1]))
             for i in range(0, len(folders), 2)]
            if figure == "kimi-family" else [(str(f), _version(f), _0523_keys(f)) for f in folders])
    out, source = dict(runs[0][2]), {}
    for label, version, keys in runs:
        for k, v in keys.items():
            if v is not None and k not in source:
                out[k], source[k] = v, f"{label} (sglang {version or 'unknown'})"
    if figure == "sglang-0523":
        keys, used, why = _pair_keys(folders)
        for k, v in keys.items():
            out[k], source[k] = v, ", ".join(map(str, used))
        if why:
            out["pair_left_out"] = why
    out["key_runs"] = source
    return out
