"""Overlay settings, passed from the launching process to every spawned scheduler process.

SGLang starts schedulers with multiprocessing *spawn*, so nothing set in Python survives; the
environment does. The launcher serialises `OverlayConfig` to JSON in `SGLANG_PATCHES_CONFIG`.
"""
from __future__ import annotations

import dataclasses
import json
import os

from sglang_patches.errors import UserError

ENV_VAR = "SGLANG_PATCHES_CONFIG"
SERVER_PID_ENV = "SGLANG_PATCHES_SERVER_PID"  # the drop-in launcher's pid (the process serving HTTP)
FEATURES = ("marker", "timing", "checks")  # implemented and safe; all on by default
OPTIONAL_FEATURES = ("draft_tp", "triton_draft")  # opt-in only: never part of "all"
DRAFT_BACKENDS = ("sglang", "triton")
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
    # --simulate-acceptance / --simulate-acceptance-from: conditional per-position accept rates that
    # replace every verify result (benchmark only; len == the server's steps). None = real verify.
    simulate_acceptance: list[float] | None = None
    accept_collapse_window: int = 256      # decode cycles in the accept-collapse alarm's rolling window
    accept_collapse_threshold: float | None = None  # None: 1.1 at steps >= 2, off at steps 1
    on_accept_collapse: str = "warn"       # warn | exit (stop the server) | off

    def to_env(self) -> str:
        data = dataclasses.asdict(self)
        data["patches"] = list(self.patches)
        return json.dumps(data)

    @classmethod
    def from_json(cls, text: str) -> "OverlayConfig":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UserError(f"{ENV_VAR} is not valid JSON ({exc}); unset it or let the launcher set it") from None
        if not isinstance(data, dict):
            raise UserError(f"{ENV_VAR} must be a JSON object, got {type(data).__name__}; unset it or let the launcher set it")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise UserError(f"{ENV_VAR} has unknown keys {sorted(unknown)}; known: {sorted(known)}")
        patches = data.get("patches", list(FEATURES))
        if not isinstance(patches, list) or not all(isinstance(p, str) for p in patches):
            raise UserError(f"{ENV_VAR}: 'patches' must be a list of feature names, got {patches!r}")
        data["patches"] = parse_patch_list(",".join(patches)) if patches else ()
        k = data.get("draft_tp_size")
        if k is not None and (not isinstance(k, int) or isinstance(k, bool) or k < 1):
            raise UserError(f"{ENV_VAR}: 'draft_tp_size' must be a positive integer or null, got {k!r}")
        w = data.get("accept_collapse_window", 256)
        if not isinstance(w, int) or isinstance(w, bool) or w < 1:
            raise UserError(f"{ENV_VAR}: 'accept_collapse_window' must be a positive integer, got {w!r}")
        t = data.get("accept_collapse_threshold")
        if t is not None and (not isinstance(t, (int, float)) or isinstance(t, bool) or not t > 1):
            raise UserError(f"{ENV_VAR}: 'accept_collapse_threshold' must be a number > 1 or null, got {t!r}")
        if data.get("on_accept_collapse", "warn") not in ON_ACCEPT_COLLAPSE:
            raise UserError(f"{ENV_VAR}: 'on_accept_collapse' must be one of {ON_ACCEPT_COLLAPSE}, "
                            f"got {data['on_accept_collapse']!r}")
        if "draft_tp" in data["patches"] and k is None:
            raise UserError(DRAFT_TP_WITHOUT_SIZE.format(where=f"{ENV_VAR}: 'patches' with draft_tp"))
        if data.get("draft_backend", "sglang") not in DRAFT_BACKENDS:
            raise UserError(f"{ENV_VAR}: 'draft_backend' must be one of {DRAFT_BACKENDS}, got {data['draft_backend']!r}")
        rates = data.get("simulate_acceptance")
        if rates is not None:
            from sglang_patches.simulate.rates import check_rates

            data["simulate_acceptance"] = check_rates(rates, f"{ENV_VAR}: 'simulate_acceptance'")
            if "marker" not in data["patches"]:
                raise UserError(f"{ENV_VAR}: 'simulate_acceptance' needs the marker feature (it reports the "
                                f"simulation in /server_info); keep marker in 'patches'")
        return cls(**data)

    @classmethod
    def from_env(cls) -> "OverlayConfig | None":
        text = os.environ.get(ENV_VAR)
        return None if not text else cls.from_json(text)


def parse_patch_list(text: str) -> tuple[str, ...]:
    """'all' | 'none' | comma list, with '-name' to drop one from all (e.g. 'all,-checks').

    'all' means the default FEATURES; OPTIONAL_FEATURES (draft_tp, triton_draft) are only chosen by name."""
    items = [x.strip() for x in text.split(",") if x.strip()]
    chosen: list[str] = []
    for item in items:
        if item == "all":
            chosen += [f for f in FEATURES if f not in chosen]
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
