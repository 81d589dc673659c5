"""SGLang's own AdaptiveController (speculative/adaptive_runtime_state.py) of the version under test, for
tests that need what a worker's `adaptive_controller` exposes. The worker handed to it is a stand-in:
SGLang's EAGLE worker needs a GPU. 0.5.17 builds the params from a config path and the worker's steps,
0.5.23 takes them ready-made."""
from __future__ import annotations

import inspect
import json
from pathlib import Path


def controller_for(worker, cfg_path: str | None):
    """SGLang's controller of `worker` (its speculative_num_steps the start) on the config file
    `cfg_path` (None: SGLang's built-in table)."""
    from sglang.srt.speculative import adaptive_runtime_state as ars
    from sglang.srt.speculative.adaptive_spec_params import AdaptiveSpeculativeParams

    if "config_path" in inspect.signature(ars.AdaptiveController.__init__).parameters:  # 0.5.17
        return ars.AdaptiveController(worker, config_path=cfg_path)
    return ars.AdaptiveController(worker, AdaptiveSpeculativeParams(initial_steps=worker.speculative_num_steps,
                                                                     cfg_path=cfg_path))


def real_controller(worker, candidates: list[int], folder: Path):
    """The controller of `worker` whose one bucket (batch size 1) has `candidates`, read from a config
    file written under `folder`."""
    cfg = Path(folder) / "adaptive.json"
    cfg.write_text(json.dumps({"1": {"candidate_steps": list(candidates)}}))
    return controller_for(worker, str(cfg))
