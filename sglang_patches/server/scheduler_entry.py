"""Scheduler-process entry point used by the drop-in launcher and Engine.

SGLang spawns schedulers with multiprocessing *spawn*: patches made in the launching process are
lost. `launch_server(..., run_scheduler_process_func=run_scheduler_process)` makes every scheduler
(and the DP controller, which forwards it) start here: apply the overlay, then run SGLang's own.
This function is pickled by reference, so it must stay a module-level function.
"""
from __future__ import annotations

import logging


def run_scheduler_process(*args, **kwargs):
    from sglang_patches.vocab.overlay_config import OverlayConfig
    from sglang_patches.server.patches.catalog import apply_overlay

    config = OverlayConfig.from_env() or OverlayConfig()
    logging.getLogger("sglang_patches").setLevel(logging.INFO)
    apply_overlay(config)
    from sglang_patches import compat

    return compat.current().RUN_SCHEDULER_PROCESS.resolve()(*args, **kwargs)
