"""SGLang plugin entry point (`sglang.srt.plugins` group): opt-in overlay for plain SGLang.

`python -m sglang.launch_server ...` calls `load_plugins()` in the launching process and again in
every scheduler process. With `SGLANG_PATCHES_ENABLE=1` this applies the overlay there (settings from
`SGLANG_PATCHES_CONFIG` if set, else defaults). Off by default: installing the package changes
nothing until the user opts in. The preflight and /spec_timing routes need the drop-in launcher.

With `on_accept_collapse: "exit"` the launching process (the one serving HTTP, which starts the
schedulers) also takes the drop-in launcher's part in a deliberate stop: it installs
`deliberate_stop`'s handler and puts its pid in SGLANG_PATCHES_SERVER_PID before the schedulers
are spawned, so the alarm stops the server at once instead of through SGLang's crash path.
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
        if config.on_accept_collapse == "exit" and _is_launching_process():
            from sglang_patches import compat, deliberate_stop
            from sglang_patches.overlay_config import SERVER_PID_ENV

            deliberate_stop.install(compat.current().KILL_PROCESS_TREE.resolve())
            os.environ[SERVER_PID_ENV] = str(os.getpid())  # inherited by the schedulers spawned next
    except UserError as err:
        # SGLang's load_plugins() logs and swallows Exceptions, which would leave the server running
        # unpatched; SystemExit is not an Exception, so the process stops: one line, exit code 2.
        exit_with(err, prog="sglang_patches")
    logging.getLogger("sglang_patches").info("sglang_patches: overlay enabled by %s=1", ENABLE_ENV)


def _is_launching_process() -> bool:
    """The process SGLang's launch_server runs in: not a multiprocessing child (schedulers and the
    detokenizer are spawned ones), and on its main thread (only there can a signal handler go)."""
    import multiprocessing
    import threading

    return multiprocessing.parent_process() is None and threading.current_thread() is threading.main_thread()
