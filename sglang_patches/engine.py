"""`sglang_patches.Engine`: the offline `sglang.Engine` with the overlay in every scheduler process.

    from sglang_patches import Engine
    engine = Engine(model_path=..., speculative_algorithm="EAGLE3", ...,
                    overlay={"timing_log": "cycles.jsonl"})
"""
from __future__ import annotations

import os

from sglang_patches import compat
from sglang_patches.launch_args import adaptive_graphs_rule
from sglang_patches.vocab.overlay_config import ENV_VAR, OverlayConfig
from sglang_patches.server.scheduler_entry import run_scheduler_process


_SGLangEngine = compat.current().ENGINE.resolve()


class Engine(_SGLangEngine):
    run_scheduler_process_func = staticmethod(run_scheduler_process)

    def __init__(self, overlay: dict | OverlayConfig | None = None, **kwargs):
        # no overlay, or a dict without "patches": the default features, `all` to the launcher's rule
        # for adaptive_graphs; a "patches" list or an OverlayConfig object is taken as written
        every = overlay is None or (isinstance(overlay, dict) and "patches" not in overlay)
        if isinstance(overlay, dict):
            overlay = OverlayConfig(**overlay)
        if overlay is not None and overlay.simulate_acceptance is not None:
            overlay = _checked_simulation(overlay, kwargs)
        overlay = overlay or OverlayConfig()
        if every:
            overlay = adaptive_graphs_rule(overlay, "all", _speculative_adaptive(kwargs))
        _refuse_settings(overlay, kwargs)
        os.environ[ENV_VAR] = overlay.to_env()
        super().__init__(**kwargs)

    def spec_timing(self) -> dict | None:
        """The live timing summary from the scheduler (same data as GET /spec_timing)."""
        from sglang_patches.server.timing.endpoint import collect_from_states

        return collect_from_states(self.get_server_info().get("internal_states", []))


def _speculative_adaptive(kwargs: dict) -> bool:
    """SGLang's speculative_adaptive as its Engine will read it (compat SERVER_ARGS_ADAPTIVE): from a
    prebuilt server_args when one is given (SGLang then ignores the other keyword arguments), else the
    keyword (default off)."""
    if "server_args" in kwargs:
        return bool(getattr(kwargs["server_args"], "speculative_adaptive", False))
    return bool(kwargs.get("speculative_adaptive", False))


def _refuse_settings(overlay: OverlayConfig, kwargs: dict) -> None:
    """The launcher's refusal of SGLang settings a feature cannot follow (compat REFUSED), from Engine
    keyword arguments (pp_size, or a prebuilt server_args) and the environment, before SGLang starts."""
    from types import SimpleNamespace

    from sglang_patches.launch_args import refuse_server_args

    given = SimpleNamespace(pp_size=kwargs["pp_size"]) if "pp_size" in kwargs else kwargs.get("server_args")
    refuse_server_args(overlay.patches, given)


def _checked_simulation(overlay: OverlayConfig, kwargs: dict) -> OverlayConfig:
    """The launcher's refusals for simulated acceptance, from Engine keyword arguments."""
    import dataclasses

    from sglang_patches.server.simulate.checks import resolve

    rates, _ = resolve(",".join(repr(float(r)) for r in overlay.simulate_acceptance), None,
                       algorithm=kwargs.get("speculative_algorithm"), steps=kwargs.get("speculative_num_steps"),
                       topk=kwargs.get("speculative_eagle_topk"))
    return dataclasses.replace(OverlayConfig.from_json(overlay.to_env()), simulate_acceptance=rates)
