"""A user's own checkpoints measured in place of a built-in fixture (benchmarks/verify_cost.py --model /
--draft): their paths as the fixtures' FixturePaths, and the checks before any server starts."""
from __future__ import annotations

import os
from pathlib import Path

from sglang_patches.errors import UserError


def own_paths(args) -> dict | None:
    """{name: FixturePaths} of --model / --draft (real weights, EAGLE3), None for the fixtures."""
    from sglang_patches.offline.fixtures import FixturePaths

    if not getattr(args, "model", None):
        return None
    target = Path(args.model).resolve()
    return {args.fixtures[0]: FixturePaths(args.fixtures[0], target, target, Path(args.draft).resolve(), "auto")}


def check_own_model(args) -> None:
    """--model and --draft together, each a folder with a config.json, and not beside --fixtures; the name
    the summary files them under is the target folder's."""
    if not args.model and not args.draft:
        return
    if not (args.model and args.draft):
        raise UserError("--model and --draft go together: the target and its EAGLE-3 drafter, both local folders")
    if args.fixtures_given:
        raise UserError("--fixtures and --model exclude each other: measure the fixtures or your own model")
    for flag, path in (("--model", args.model), ("--draft", args.draft)):
        if not os.path.isfile(os.path.join(path, "config.json")):
            raise UserError(f"{flag} {path}: no config.json there; give the checkpoint's local folder")
    args.fixtures = [os.path.basename(os.path.normpath(args.model)) or "model"]
