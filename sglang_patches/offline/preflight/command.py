"""The drop-in launcher's own flags in a pasted `python -m sglang_patches.launch ...` command.

They are parsed out with the launcher's own flag table (launch_args.split_overlay_args) and checked
with the launcher's own overlay settings (launch_args.overlay_config), so a value the launcher
refuses in its flags (`--patches bogus`, `--accept-collapse-window 0`, `--draft-weights fp8` without
the triton backend) is refused here in the same line; checks that need the server's other flags or
files (the timing log's path, the GPU) are the launcher's alone. `--fixture NAME` stands for the model flags
the launcher fills from the fixture cache (fixtures.model_flags.fixture_flags, the list the launcher reads); the
other overlay flags change nothing preflight checks and are named as ignored overlay flags.
"""
from __future__ import annotations

from sglang_patches.errors import UserError


def split_overlay(argv: list[str]) -> tuple[list[str], list[str], str | None]:
    """(argv without the overlay flags and their values, the overlay flag names given other than
    --fixture, the --fixture name or None). argv without overlay flags comes back unchanged."""
    from sglang_patches.launch_args import overlay_flag_names

    names = overlay_flag_names()
    given = list(dict.fromkeys(a.split("=", 1)[0] for a in argv if a.split("=", 1)[0] in names))
    if not given:
        return argv, [], None
    from sglang_patches.launch_args import overlay_config, split_overlay_args

    ns, rest = split_overlay_args(argv)
    overlay_config(ns)  # the launcher's refusals of the overlay values themselves, one line each
    return rest, [g for g in given if g != "--fixture"], ns.fixture


def fixture_flags(name: str, argv: list[str]) -> tuple[list[str], str]:
    """(the model flags fixture `name` adds to argv, a note naming them) for a fixture already built in
    the fixture cache; one line saying how to build it otherwise (preflight builds nothing)."""
    from sglang_patches.offline.fixtures import fixture_paths, load_fixture
    from sglang_patches.offline.fixtures.model_flags import fixture_flags as launcher_fixture_flags

    paths = fixture_paths(name)  # an unknown name: one line listing the fixtures
    if load_fixture(paths.root) is None:  # no complete build (no stamp, or configs missing)
        from sglang_patches.offline.fixtures.specs import CATALOGUE

        force = " --force" if paths.root.exists() else ""
        where = ("on a CUDA GPU machine (it trains the pair)" if getattr(CATALOGUE.get(name), "trained", False)
                 else "(seconds, no GPU)")
        raise UserError(f"--fixture {name}: not built in the fixture cache ({paths.root}); build it {where} with "
                        f"`sglang-patches fixtures build {name} --out {paths.root}{force}` (the launcher also "
                        "builds it on first use), then run preflight again")
    extra = launcher_fixture_flags(name, argv)
    return extra, f"fixture {name} (from the fixture cache): " + (" ".join(extra) or "every flag it fills is given")


def dummy_fixture(target: str, draft: str) -> str | None:
    """The name of the dummy-weight fixture whose target and drafter these are (its fixture.json beside
    them says so), else None. The launcher serves such a pair with --load-format dummy, so preflight
    checks it that way: no weight file to look for, and the dummy-drafter warning instead."""
    import json
    import os
    from pathlib import Path

    stamp = Path(draft).parent / "fixture.json"
    try:
        meta = json.loads(stamp.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or meta.get("load_format") != "dummy":
        return None
    same = [os.path.realpath(str(meta.get(k) or "")) == os.path.realpath(p) for k, p in (("target", target),
                                                                                         ("draft", draft))]
    return str(meta.get("name") or stamp.parent.name) if all(same) else None
