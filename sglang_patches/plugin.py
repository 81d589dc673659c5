"""SGLang plugin entry point (`sglang.srt.plugins` group): opt-in overlay for plain SGLang.

`python -m sglang.launch_server ...` calls `load_plugins()` in the launching process and again in
every scheduler process. With `SGLANG_PATCHES_ENABLE=1` this applies the overlay there (settings from
`SGLANG_PATCHES_CONFIG` if set, else defaults). Off by default: installing the package changes
nothing until the user opts in. The preflight and /spec_timing routes need the drop-in launcher.
"""
from __future__ import annotations

import logging
import os

ENABLE_ENV = "SGLANG_PATCHES_ENABLE"


def load() -> None:
    if os.environ.get(ENABLE_ENV) != "1":
        return
    from sglang_patches.errors import UserError, exit_with
    from sglang_patches.overlay_config import OverlayConfig

    try:
        config = OverlayConfig.from_env() or OverlayConfig()
        from sglang_patches.patches.catalog import apply_overlay

        apply_overlay(config)
    except UserError as err:
        # SGLang's load_plugins() logs and swallows Exceptions, which would leave the server running
        # unpatched; SystemExit is not an Exception, so the process stops: one line, exit code 2.
        exit_with(err, prog="sglang_patches")
    logging.getLogger("sglang_patches").info("sglang_patches: overlay enabled by %s=1", ENABLE_ENV)
