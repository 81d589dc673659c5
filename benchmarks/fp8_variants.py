"""Which fp8-input configuration a recorded fp8_draft_bench case ran (benchmarks/fp8_draft_summary.py):
--draft-weights fp8's fp8-input modules changed on 2026-12-04 (gate_up and the lm_head, then gate_up
alone), so a recorded `triton_fp8` case is read by its server's load line, not by its name. Pure Python."""
from __future__ import annotations

import re

W8A8_LINE = re.compile(r"fp8 activations \(w8a8\) at [\d.]+ rows on (\d+) modules \(([^)]*)\)")  # absent in older logs
# the fp8-input modules a by-name variant's load line must name
VARIANT_W8A8 = {"triton_fp8_gu": {"gate_up"}, "triton_fp8_a8lm": {"gate_up", "lm_head"}}
DEFAULT_W8A8 = frozenset({"gate_up"})  # fp8_weights.DEFAULT_FP8_INPUTS, as a load line names it
FP8_INPUTS_ENV = "SGLANG_PATCHES_FP8_INPUTS"  # fp8_weights.FP8_INPUTS_ENV: how a variant's server gets its set


def w8a8_named(line: str) -> set:
    """Which of gate_up / lm_head a load line's fp8-activation part names."""
    m = W8A8_LINE.search(line)
    return {k for k in ("gate_up", "lm_head") if m and k in m[2]}


def ran_as(name: str, c: dict) -> str | None:
    """The case name a recorded case stands for now: a `triton_fp8` case ran what --draft-weights fp8 meant
    on its day, which its load line says. Fp8 inputs on DEFAULT_W8A8: triton_fp8 still; on gate_up and the
    lm_head: triton_fp8_a8lm; on none (a line before fp8 activations existed, or weight-only):
    triton_fp8_wo; another set: None (no configuration of today's). A case without a load line (an error
    before it, a hand-made one) and every other config: as recorded."""
    head, _, config = name.rpartition(":")
    line = c.get("backend_on_line")
    if config != "triton_fp8" or not c.get("launcher_fp8") or not line:
        return name
    ran = frozenset(w8a8_named(line))
    if ran == DEFAULT_W8A8:
        return name
    variant = {frozenset(): "triton_fp8_wo", **{frozenset(v): k for k, v in VARIANT_W8A8.items()}}.get(ran)
    return f"{head}:{variant}" if variant else None


def default_view(runs: list[tuple[str, dict]]) -> tuple[list[tuple[str, dict]], dict, dict]:
    """Each run's cases under the names they stand for now (ran_as), before the runs are merged, so that
    an earlier default's triton_fp8 and today's never compete as one case. A relabelled case keeps its
    recorded name in `recorded_as`; one whose new name its run also recorded directly, or with no name
    today, is left out (`dropped`). Returns (runs, {new name: recorded name}, {src: {recorded: why}})."""
    out, moved, dropped = [], {}, {}
    for src, run in runs:
        cases = {}
        for name, c in run["cases"].items():
            new = ran_as(name, c)
            why = ("its fp8-input modules are no configuration of today's" if new is None else
                   f"its run also recorded {new}" if new != name and new in run["cases"] else None)
            if why:
                dropped.setdefault(src, {})[name] = why
                continue
            cases[new] = c if new == name else {**c, "recorded_as": name}
            if new != name:
                moved[new] = name
        out.append((src, {**run, "cases": cases}))
    return out, moved, dropped


def gu_stands_in(cases: dict) -> dict:
    """triton_fp8_gu (the default, spelled out) serves as FIXTURE:triton_fp8 where no such case ran;
    returns {triton_fp8 name: gu name} for the ones it filled."""
    filled = {}
    for name, c in list(cases.items()):
        head, _, config = name.rpartition(":")
        if VARIANT_W8A8.get(config) == DEFAULT_W8A8 and f"{head}:triton_fp8" not in cases:
            cases[f"{head}:triton_fp8"] = {**c, "recorded_as": c.get("recorded_as", name)}
            filled[f"{head}:triton_fp8"] = name
    return filled


def a8lm_stands_in_at_bs1(cases: dict) -> dict:
    """At batch 1 (topk 1: one row) both defaults run the same kernels: fp8 activations start at 2 rows
    (fp8_weights: fp8_linear's GEMV at 1 row for every module), so the earlier default differs from
    today's only at 2..64 rows, in the lm_head. A triton_fp8_a8lm case's batch-1 figures therefore serve
    as FIXTURE:triton_fp8's where no triton_fp8 case ran (its other batch sizes stay missing); measured
    twice on 8B shapes: 0.3283 and 0.3282 ms. Returns {triton_fp8 name: "a8lm name (bs 1 only)"}."""
    filled = {}
    for name, c in list(cases.items()):
        head, _, config = name.rpartition(":")
        one = (c.get("bs") or {}).get("1")
        if config == "triton_fp8_a8lm" and one is not None and f"{head}:triton_fp8" not in cases:
            cases[f"{head}:triton_fp8"] = {**c, "bs": {"1": one}, "recorded_as": c.get("recorded_as", name)}
            filled[f"{head}:triton_fp8"] = f"{c.get('recorded_as', name)} (bs 1 only)"
    return filled
