"""Overlay settings, passed from the launching process to every spawned scheduler process.

SGLang starts schedulers with multiprocessing *spawn*, so nothing set in Python survives; the
environment does. The launcher serialises `OverlayConfig` to JSON in `SGLANG_PATCHES_CONFIG`.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os

from sglang_patches.errors import UserError
from sglang_patches.vocab.rates import MAX_POSITIONS

ENV_VAR = "SGLANG_PATCHES_CONFIG"
SERVER_PID_ENV = "SGLANG_PATCHES_SERVER_PID"  # the drop-in launcher's pid (the process serving HTTP)
STOP_REASON_ENV = "SGLANG_PATCHES_STOP_REASON"  # where a scheduler leaves the line the launcher prints as it stops
FEATURES = ("marker", "timing", "checks")  # implemented and safe; all on by default
OPTIONAL_FEATURES = ("draft_tp", "triton_draft", "step_timing", "adaptive_graphs")  # opt-in: named, or added with their flag (launch_args)
DRAFT_BACKENDS = ("sglang", "triton")
# --draft-weights values that install FP8 drafter linears (both need triton_draft): "fp8" runs gate_up with
# fp8 activations too (fp8_weights.DEFAULT_FP8_INPUTS), "fp8-weight-only" keeps bf16 activations
# everywhere (the A/B baseline). Every check of the setting goes through is_fp8.
FP8_WEIGHTS = ("fp8", "fp8-weight-only")
DRAFT_WEIGHTS = ("bf16",) + FP8_WEIGHTS  # --draft-weights: as loaded, or one of FP8_WEIGHTS
FP8_WITHOUT_TRITON = ("{where} needs --draft-backend triton (the FP8 drafter linears run through its Triton "
                      "kernels); add --draft-backend triton or use --draft-weights bf16")


def is_fp8(weights) -> bool:
    """True for a --draft-weights value that installs FP8 drafter linears (either of FP8_WEIGHTS)."""
    return weights in FP8_WEIGHTS
ON_ACCEPT_COLLAPSE = ("warn", "exit", "off")
KNOWN_FEATURES = FEATURES + OPTIONAL_FEATURES
DRAFT_TP_WITHOUT_SIZE = ("{where} needs --draft-tp-size K (without it every rank would replicate the drafter "
                         "unasked); add --draft-tp-size K, or drop draft_tp from the patches")


@dataclasses.dataclass
class OverlayConfig:
    patches: tuple[str, ...] = FEATURES
    timing_log: str | None = None          # JSONL path; None = no file (stats/metrics still kept)
    timing_log_max_mb: float = 256.0       # rotate to PATH.1 ... when a file exceeds this size
    timing_log_backups: int = 3
    timing_all_ranks: bool = False         # default: only TP rank 0 records
    timing_summary_interval: int = 500     # cycles between summary log lines (0 = off)
    timing_ring_size: int = 4096           # cycles kept in memory for percentiles / unflushed lines
    allow_hidden_state_mismatch: bool = False
    draft_tp_size: int | None = None       # --draft-tp-size K: drafter TP (None = the target's)
    draft_backend: str = "sglang"          # --draft-backend: "triton" = our kernels in the drafter (feature triton_draft)
    draft_backend_fallback: bool = False   # --draft-backend-fallback: unsupported -> warn, run sglang's
    draft_weights: str = "bf16"            # --draft-weights: FP8_WEIGHTS = FP8 drafter linears (with triton_draft)
    # --simulate-acceptance / --simulate-acceptance-from: conditional per-position accept rates that
    # replace every verify result (benchmark only; len == the server's steps). None = real verify.
    simulate_acceptance: list[float] | None = None
    accept_collapse_window: int = 256      # decode cycles in the accept-collapse alarm's rolling window
    accept_collapse_threshold: float | None = None  # None: 1.1 at steps >= 2, off at steps 1
    on_accept_collapse: str = "warn"       # warn | exit (stop the server) | off

    def __post_init__(self):
        for f in dataclasses.fields(self):
            problem = field_problem(f.name, getattr(self, f.name))
            if problem:
                raise UserError(f"overlay setting {f.name!r} {problem}")
        if is_fp8(self.draft_weights) and "triton_draft" not in self.patches:
            raise UserError("overlay setting 'draft_weights' " + FP8_WITHOUT_TRITON.format(where=self.draft_weights))

    def to_env(self) -> str:
        data = dataclasses.asdict(self)
        data["patches"] = list(self.patches)
        return json.dumps(data)

    @classmethod
    def from_json(cls, text: str) -> "OverlayConfig":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UserError(f"{ENV_VAR} is not valid JSON ({exc}); fix it, unset it, or let the drop-in launcher set it") from None
        except RecursionError:
            raise UserError(f"{ENV_VAR} is nested too deeply to be an overlay setting; fix it, unset it, or "
                            "let the drop-in launcher set it") from None
        if not isinstance(data, dict):
            raise UserError(f"{ENV_VAR} must be a JSON object, got {type(data).__name__}; fix it, unset it, or let the drop-in launcher set it")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise UserError(f"{ENV_VAR} has unknown keys {sorted(unknown)}; known: {sorted(known)}")
        patches = data.get("patches", list(FEATURES))
        if not isinstance(patches, list) or not all(isinstance(p, str) for p in patches):
            raise UserError(f"{ENV_VAR}: 'patches' must be a list of feature names, got {patches!r}")
        try:
            data["patches"] = parse_patch_list(",".join(patches)) if patches else ()
        except UserError as err:
            raise UserError(f"{ENV_VAR}: 'patches': {str(err).split(': ', 1)[-1]}") from None
        k = data.get("draft_tp_size")
        if "draft_tp" in data["patches"] and k is None:
            raise UserError(DRAFT_TP_WITHOUT_SIZE.format(where=f"{ENV_VAR}: 'patches' with draft_tp"))
        rates = data.get("simulate_acceptance")
        if rates is not None:
            from sglang_patches.vocab.rates import check_rates

            data["simulate_acceptance"] = check_rates(rates, f"{ENV_VAR}: 'simulate_acceptance'")
            if "marker" not in data["patches"]:
                raise UserError(f"{ENV_VAR}: 'simulate_acceptance' needs the marker feature (it reports the "
                                f"simulation in /server_info); keep marker in 'patches'")
        for key, value in data.items():
            problem = field_problem(key, value)
            if problem:
                raise UserError(f"{ENV_VAR}: {key!r} {problem}; fix the JSON or unset it and use the launcher's flags")
        if is_fp8(data.get("draft_weights")) and "triton_draft" not in data["patches"]:
            raise UserError(f"{ENV_VAR}: 'draft_weights' {data['draft_weights']} without triton_draft in 'patches': "
                            + FP8_WITHOUT_TRITON.format(where=f"--draft-weights {data['draft_weights']}"))
        return cls(**data)

    @classmethod
    def from_env(cls) -> "OverlayConfig | None":
        text = os.environ.get(ENV_VAR)
        return None if not text else cls.from_json(text)


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


# field -> (accepts(value), what it must be). Every OverlayConfig field has an entry (a test keeps
# it so): a JSON "no" for a bool would otherwise be truthy and silently switch a check off.
FIELD_RULES = {
    "patches": (lambda v: isinstance(v, (tuple, list)) and all(p in KNOWN_FEATURES for p in v),
                f"must be a list of features from {', '.join(KNOWN_FEATURES)}"),
    "timing_log": (lambda v: v is None or (isinstance(v, str) and v.strip() != "" and "\0" not in v),
                   "must be a file path (a non-empty string) or null"),
    "timing_log_max_mb": (lambda v: _is_number(v) and 0 < v <= 1 << 20,
                          "must be a number of megabytes > 0 (at most 1048576)"),
    "timing_log_backups": (lambda v: _is_int(v) and 0 <= v <= 1000, "must be an integer from 0 to 1000"),
    "timing_all_ranks": (lambda v: isinstance(v, bool), "must be true or false"),
    "timing_summary_interval": (lambda v: _is_int(v) and v >= 0, "must be an integer >= 0 (0 = off)"),
    "timing_ring_size": (lambda v: _is_int(v) and 1 <= v <= 1 << 24, "must be an integer from 1 to 16777216"),
    "allow_hidden_state_mismatch": (lambda v: isinstance(v, bool), "must be true or false"),
    "draft_tp_size": (lambda v: v is None or (_is_int(v) and v >= 1), "must be a positive integer or null"),
    "draft_backend": (lambda v: v in DRAFT_BACKENDS, f"must be one of {', '.join(DRAFT_BACKENDS)}"),
    "draft_backend_fallback": (lambda v: isinstance(v, bool), "must be true or false"),
    "draft_weights": (lambda v: v in DRAFT_WEIGHTS, f"must be one of {', '.join(DRAFT_WEIGHTS)}"),
    "simulate_acceptance": (lambda v: v is None or (isinstance(v, (list, tuple)) and 0 < len(v) <= MAX_POSITIONS
                                                    and all(_is_number(r) and 0 <= r <= 1 for r in v)),
                            f"must be null or a list of 1 to {MAX_POSITIONS} rates in [0, 1]"),
    "accept_collapse_window": (lambda v: _is_int(v) and 1 <= v <= 1 << 24, "must be an integer from 1 to 16777216"),
    "accept_collapse_threshold": (lambda v: v is None or (_is_number(v) and v > 1), "must be a number > 1 or null"),
    "on_accept_collapse": (lambda v: v in ON_ACCEPT_COLLAPSE, f"must be one of {', '.join(ON_ACCEPT_COLLAPSE)}"),
}


def field_problem(name: str, value) -> str | None:
    """Why `value` is not valid for OverlayConfig field `name` ("must be ..., got X"), or None."""
    rule = FIELD_RULES.get(name)
    if rule is None:  # tests/test_overlay_config.py fails for a field without a rule
        return None
    accepts, what = rule
    try:
        ok = accepts(value)
    except TypeError:
        ok = False
    shown = repr(value)
    return None if ok else f"{what}, got {shown if len(shown) <= 80 else shown[:77] + '...'}"


def parse_patch_list(text: str, all_also: tuple[str, ...] = ()) -> tuple[str, ...]:
    """'all' | 'none' | comma list, with '-name' to drop one from all (e.g. 'all,-checks').

    'all' means the default FEATURES (and `all_also`, the launcher's flag-dependent additions);
    OPTIONAL_FEATURES are otherwise only chosen by name."""
    items = [x.strip() for x in text.split(",") if x.strip()]
    if not items:  # `--patches ""` from an unset shell variable, say: not silently none
        raise UserError(f"--patches {text!r}: no feature named; give all (the default), none, or a comma list of "
                        f"{', '.join(KNOWN_FEATURES)}")
    # a list that starts by dropping one (`-timing`) drops it from all, as `all,-timing`
    every = FEATURES + tuple(all_also)
    chosen: list[str] = list(every) if items[0].startswith("-") else []
    for item in items:
        if item == "all":
            chosen += [f for f in every if f not in chosen]
        elif item == "none":
            chosen = []
        elif item.startswith("-") and item[1:] in KNOWN_FEATURES:
            chosen = [f for f in chosen if f != item[1:]]
        elif item in KNOWN_FEATURES:
            if item not in chosen:
                chosen.append(item)
        else:
            raise UserError(f"--patches: unknown feature {item!r}; choose from {', '.join(KNOWN_FEATURES)}, all, none")
    return tuple(chosen)
