"""`sglang-patches <subcommand>` / `python -m sglang_patches <subcommand>`.

Each subcommand lives in its own module and exposes `main(argv: list[str]) -> int`; this file only
dispatches, so `sglang-patches --help` stays fast and never imports torch or SGLang.
"""
from __future__ import annotations

import importlib
import sys

from sglang_patches.errors import UserError, exit_with

# name -> (module:function, one-line help)
SUBCOMMANDS = {
    "version": ("sglang_patches.versions:cli_main", "print overlay, SGLang, torch, CUDA and GPU versions"),
    "patches": ("sglang_patches.server.patches.catalog:cli_main", "list what would be patched for the installed SGLang"),
    "preflight": ("sglang_patches.offline.preflight.cli:main", "check a target + drafter pair for hidden-state mismatches (no GPU)"),
    "report": ("sglang_patches.offline.report:main", "summarise a phase-timing JSONL log (table, JSON, PNG)"),
    "advise": ("sglang_patches.offline.advise_cli:main", "predict other steps / draft tokens from one timing log and recommend one"),
    "fixtures": ("sglang_patches.offline.fixtures.cli:main", "build model fixtures (real-shaped dummy or trained pairs)"),
    "sweep": ("sglang_patches.offline.sweep.cli:main", "sweep steps/topk/draft tokens/batch size against no-speculation"),
    "profile": ("sglang_patches.profiling.cli:main", "py-spy + torch profiler + phase timing of a running server, one window"),
}


def _usage() -> str:
    width = max(map(len, SUBCOMMANDS))
    lines = ["usage: sglang-patches <subcommand> [options]   (sglang-patches --version: the overlay's version)",
             "", "subcommands:"]
    lines += [f"  {name:<{width}}  {help_}" for name, (_, help_) in SUBCOMMANDS.items()]
    lines += ["", "Run `sglang-patches <subcommand> --help` for its options.",
              "The drop-in server is `python -m sglang_patches.launch` (see its --help)."]
    return "\n".join(lines)


# subcommands that import SGLang only to read it: its import-time warnings (no Triton, no AWQ on this
# platform, no CUDA architecture) say nothing about what they print
QUIET_SGLANG_IMPORT = ("patches", "version")


def quiet_sglang_import() -> None:
    """Silence SGLang's import-time Python warnings and its loggers below ERROR in this process."""
    import logging
    import warnings

    warnings.filterwarnings("ignore", module=r"sglang(\.|$)")
    logging.getLogger("sglang").setLevel(logging.ERROR)


def _closed_pipe() -> int:
    """stdout's reader went away (`| head`): not an error. Point stdout at /dev/null so that the
    interpreter's final flush does not raise again, and exit 0 quietly."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        print(_usage(), file=sys.stderr)
        print("sglang-patches: error: a subcommand is required", file=sys.stderr)
        return 2
    if argv[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0
    if argv[0] in ("--version", "-V"):
        from sglang_patches import __version__

        print(f"sglang-patches {__version__}")
        return 0
    name, rest = argv[0], argv[1:]
    if name not in SUBCOMMANDS:
        exit_with(UserError(f"unknown subcommand {name!r}; choose one of: {', '.join(SUBCOMMANDS)}"))
    target, _ = SUBCOMMANDS[name]
    mod_name, func_name = target.split(":")
    if name in QUIET_SGLANG_IMPORT:
        quiet_sglang_import()
    try:
        func = getattr(importlib.import_module(mod_name), func_name)
        code = int(func(rest) or 0)
        sys.stdout.flush()  # inside the try: a closed pipe shows here, not at interpreter exit
        return code
    except BrokenPipeError:
        return _closed_pipe()
    except UserError as err:
        exit_with(err)
    except KeyboardInterrupt:
        print("sglang-patches: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
