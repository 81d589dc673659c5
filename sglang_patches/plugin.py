"""SGLang plugin entry point (`sglang.srt.plugins` group): opt-in overlay for plain SGLang.

`python -m sglang.launch_server ...` calls `load_plugins()` in the launching process and again in
every scheduler process. With `SGLANG_PATCHES_ENABLE=1` (or true, yes, on) this applies the overlay there (settings from
`SGLANG_PATCHES_CONFIG` if set, else defaults). Off by default: installing the package changes
nothing until the user opts in. The preflight and /spec_timing routes need the drop-in launcher.

In the process of SGLang's server CLI the launcher's rule for `adaptive_graphs` applies to that
process's own flags (a --config file's included): `all` (SGLANG_PATCHES_CONFIG unset, without a
"patches" key, or with "all" in it; ["all", "-adaptive_graphs"] leaves it out) under
--speculative-adaptive includes it, and the result is written back to SGLANG_PATCHES_CONFIG, which
the schedulers it spawns inherit. Under `sglang.Engine`
the plugin is loaded before the Engine's arguments become ServerArgs, so there the features are
taken as SGLANG_PATCHES_CONFIG names them (`sglang_patches.Engine` applies the rule itself).

Settings this SGLang runs that a feature cannot follow (--pp-size > 1 with timing on 0.5.23) are
refused in the launching process before any process starts: the server CLI's flags in load(), an
Engine's ServerArgs in Engine._launch_subprocesses. A script that calls
`sglang.srt.entrypoints.http_server.launch_server(server_args)` itself, without SGLang's plugin
loading having run in it first, is not checked on its first launch (SGLang loads plugins inside that
launch, after the point the check hooks).

With `on_accept_collapse: "exit"` the process of SGLang's server CLI (`sglang serve`,
`python -m sglang.launch_server`: it serves HTTP and starts the schedulers) also takes the drop-in
launcher's part in a deliberate stop: it installs `deliberate_stop`'s handler and puts its pid in
SGLANG_PATCHES_SERVER_PID before the schedulers are spawned, so the alarm stops the server at once
instead of through SGLang's crash path. An offline `sglang.Engine` also loads plugins, in the
user's own process (a script, a notebook, a trainer): that process's SIGUSR1 is left alone, and its
schedulers stop it through SGLang's SIGQUIT route.
"""
from __future__ import annotations

import logging
import os
import sys

ENABLE_ENV = "SGLANG_PATCHES_ENABLE"


ON, OFF = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")  # SGLANG_PATCHES_ENABLE, any case


def load() -> None:
    flag = os.environ.get(ENABLE_ENV, "").strip().lower()
    if flag in OFF:
        return
    if flag not in ON:  # neither: said and left off (under the drop-in launcher or sglang_patches.Engine,
        # which apply the overlay themselves, a stray value must not stop the server)
        print(f"sglang-patches: warning: {ENABLE_ENV}={os.environ[ENABLE_ENV]!r} is neither on (1, true, yes, on) "
              "nor off (0, false, no, off); the plugin stays off in this process", file=sys.stderr)
        return
    from sglang_patches.errors import UserError, exit_with
    from sglang_patches.vocab.overlay_config import OverlayConfig

    try:
        config = OverlayConfig.from_env() or OverlayConfig()
        if _is_sglang_server_cli():
            config = _with_adaptive_graphs(config)
        from sglang_patches.launch_args import refuse_sglang_settings

        # before anything is patched: the environment in every process; SGLang's flags (a --config
        # file's included) where they are this process's own (the server CLI)
        refuse_sglang_settings(config.patches, sys.argv[1:] if _is_sglang_server_cli() else [])
        _watch_launch(config)  # what only SGLang's ServerArgs shows: an Engine's keyword arguments
        from sglang_patches.server.patches.catalog import apply_overlay

        apply_overlay(config)
        if config.on_accept_collapse == "exit" and _is_sglang_server_cli():
            from sglang_patches import compat
            from sglang_patches.server import deliberate_stop
            from sglang_patches.vocab.overlay_config import SERVER_PID_ENV

            deliberate_stop.install(compat.current().KILL_PROCESS_TREE.resolve())
            os.environ[SERVER_PID_ENV] = str(os.getpid())  # inherited by the schedulers spawned next
    except UserError as err:
        # SGLang's load_plugins() logs and swallows Exceptions, which would leave the server running
        # unpatched; SystemExit is not an Exception, so the process stops: one line, exit code 2.
        exit_with(err, prog="sglang-patches")
    logging.getLogger("sglang_patches").info("sglang_patches: overlay enabled by %s=%s", ENABLE_ENV,
                                             os.environ[ENABLE_ENV])


def _with_adaptive_graphs(config):
    """The launcher's rule (launch_args.with_adaptive_graphs) on the server CLI's flags. The schedulers
    are spawned, so they see only the environment: a config the rule changed is written to
    SGLANG_PATCHES_CONFIG before any of them starts, and reads there as an explicit list (a second
    load() in this process finds the feature listed and changes nothing)."""
    from sglang_patches.launch_args import EveryKeyStoreTrue, with_adaptive_graphs, with_sglang_config
    from sglang_patches.vocab.overlay_config import ENV_VAR

    given = with_sglang_config(sys.argv[1:], store_true=EveryKeyStoreTrue())  # SGLang's flags, the file's included
    chosen = with_adaptive_graphs(config, _patches_as_given(), given)
    if chosen is not config:
        os.environ[ENV_VAR] = chosen.to_env()
    return chosen


def _patches_as_given() -> str:
    """SGLANG_PATCHES_CONFIG's "patches" spelled as the launcher's --patches: unset or without the key
    means all, [] none; a list keeps its all / -name items (OverlayConfig.from_env has vetted it)."""
    import json

    from sglang_patches.vocab.overlay_config import ENV_VAR

    text = os.environ.get(ENV_VAR)
    patches = json.loads(text).get("patches", ["all"]) if text else ["all"]
    return ",".join(patches) or "none"


_launch_hook: list = []  # the applied refusal hook on Engine._launch_subprocesses (one per process)


def _watch_launch(config) -> None:
    """Refuse in SGLang's Engine._launch_subprocesses, the call every launching process makes
    (`sglang.Engine(...)`, `Engine(server_args=...)`, `sglang serve`) after its ServerArgs exist and
    before it starts any process; SGLang loads plugins before it builds them, so they are not seen
    in load(). Installed only where a refusal can apply (this SGLang's REFUSED, these features).

    Not in a multiprocessing child (scheduler, detokenizer, DP controller) that has not imported
    SGLang's engine module: resolving the hook's target imports it, and that import sets uvloop's
    event-loop policy for the whole process. A child starts no Engine it has not imported."""
    import multiprocessing

    from sglang_patches import compat
    from sglang_patches.server.hooks import REGISTRY, HookSpec, installed_sglang_version

    if any(h in REGISTRY.applied for h in _launch_hook):
        return  # installed (an undo_overlay() takes it out too)
    if not compat.setting_refusal(installed_sglang_version(), config.patches, pp_size=2, environ={}):
        return
    if multiprocessing.parent_process() is not None and compat.current().ENGINE.module not in sys.modules:
        return

    def check(cls, server_args=None, *_, **__):  # classmethod: SGLang passes server_args= by name
        _refuse_launch(config, server_args)

    spec = HookSpec(compat.current().LAUNCH_SUBPROCESSES.target, "before", check,
                    params=("server_args",), note="refuses REFUSED settings before any process starts")
    _launch_hook[:] = REGISTRY.apply([spec])


def _refuse_launch(config, server_args) -> None:
    """Nothing has started when this refuses, so nothing is undone: the overlay stays as applied
    (an Engine already running in this process keeps it) and the hook stays for the next launch."""
    from sglang_patches.errors import UserError, exit_with
    from sglang_patches.launch_args import refuse_server_args

    try:
        refuse_server_args(config.patches, server_args)
    except UserError as err:
        if _is_sglang_server_cli():
            exit_with(err, prog="sglang-patches")  # the server CLI: one line, exit code 2
        raise  # an Engine user's script: the one-line UserError, to catch or to stop it


def _is_sglang_server_cli(argv=None, main_module=None) -> bool:
    """The process of SGLang's server CLI: `python -m sglang.launch_server` or the `sglang serve`
    console script; not a multiprocessing child (schedulers, detokenizer) and on its main thread
    (only there can a signal handler go). Not an `Engine` user's process."""
    import multiprocessing
    import sys
    import threading

    argv = sys.argv if argv is None else argv
    main = sys.modules.get("__main__") if main_module is None else main_module
    spec_name = getattr(getattr(main, "__spec__", None), "name", None) or ""
    cli = spec_name == "sglang.launch_server" or (
        (os.path.basename(argv[0]) if argv else "") == "sglang" and argv[1:2] == ["serve"])
    return cli and multiprocessing.parent_process() is None and threading.current_thread() is threading.main_thread()
