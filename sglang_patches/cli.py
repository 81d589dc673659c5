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
    "patches": ("sglang_patches.patches.catalog:cli_main", "list what would be patched for the installed SGLang"),
    "preflight": ("sglang_patches.preflight.cli:main", "check a target + drafter pair for hidden-state mismatches (no GPU)"),
    "report": ("sglang_patches.timing.report:main", "summarise a phase-timing JSONL log (table, JSON, PNG)"),
    "advise": ("sglang_patches.timing.advise_cli:main", "predict other steps / draft tokens from one timing log and recommend one"),
    "fixtures": ("sglang_patches.fixtures.cli:main", "build model fixtures (real-shaped dummy or trained pairs)"),
    "sweep": ("sglang_patches.sweep.cli:main", "sweep steps/topk/draft tokens/batch size against no-speculation"),
    "profile": ("sglang_patches.profiling.cli:main", "py-spy + torch profiler + phase timing of a running server, one window"),
}


def _usage() -> str:
    width = max(map(len, SUBCOMMANDS))
    lines = ["usage: sglang-patches <subcommand> [options]", "", "subcommands:"]
    lines += [f"  {name:<{width}}  {help_}" for name, (_, help_) in SUBCOMMANDS.items()]
    lines += ["", "Run `sglang-patches <subcommand> --help` for its options.",
              "The drop-in server is `python -m sglang_patches.launch` (see its --help)."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0
    name, rest = argv[0], argv[1:]
    if name not in SUBCOMMANDS:
        exit_with(UserError(f"unknown subcommand {name!r}; choose one of: {', '.join(SUBCOMMANDS)}"))
    target, _ = SUBCOMMANDS[name]
    mod_name, func_name = target.split(":")
    try:
        func = getattr(importlib.import_module(mod_name), func_name)
        return int(func(rest) or 0)
    except UserError as err:
        exit_with(err)
    except KeyboardInterrupt:
        print("sglang-patches: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
