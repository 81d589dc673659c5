"""Which hooks each overlay feature installs, applying them, and `sglang-patches patches`."""
from __future__ import annotations

import logging

from sglang_patches.cliargs import OneLineParser
from sglang_patches.errors import UserError
from sglang_patches.server.hooks import REGISTRY, HookSpec, installed_sglang_version
from sglang_patches.vocab.overlay_config import FEATURES, OPTIONAL_FEATURES, OverlayConfig, parse_patch_list

logger = logging.getLogger("sglang_patches")
_applied_in_process: list = []


def builders() -> dict:
    """Feature name -> the function that lists its hooks for the installed SGLang."""
    from sglang_patches.server import draft_backend, draft_tp
    from sglang_patches.server.patches import adaptive_graphs, hidden_state_checks, marker
    from sglang_patches.server.timing import hooks as timing_hooks, step_hooks

    return {"marker": marker.specs, "timing": timing_hooks.specs, "checks": hidden_state_checks.specs,
            "draft_tp": draft_tp.specs,  # opt-in (OPTIONAL_FEATURES): --draft-tp-size
            "triton_draft": draft_backend.specs,  # opt-in: --draft-backend triton
            "step_timing": step_hooks.specs,  # opt-in: GPU ms per no-speculation step (baselines)
            "adaptive_graphs": adaptive_graphs.specs}  # opt-in; the launcher adds it under --speculative-adaptive


def specs_for(features) -> list[HookSpec]:
    table = builders()
    out: list[HookSpec] = []
    for name in features:
        out += table[name]()
    return out


def nothing_to_do(feature: str) -> str | None:
    """Why a feature installs no hook on this SGLang: its module's NOTHING_TO_DO, where it has one."""
    import sys

    return getattr(sys.modules[builders()[feature].__module__], "NOTHING_TO_DO", None)


def apply_overlay(config: OverlayConfig) -> list:
    """Apply the configured features once per process (idempotent). Raises PatchTargetError."""
    if _applied_in_process:
        return _applied_in_process
    from sglang_patches.server.timing import runtime
    from sglang_patches.versions import check_sglang_version

    warning = check_sglang_version(installed_sglang_version())
    if warning:
        logger.warning("sglang_patches: %s", warning)
    runtime.configure(config)
    specs = specs_for(config.patches)
    sim = None
    if config.simulate_acceptance is not None:
        from sglang_patches.server.simulate import sglang_hooks as sim

        sim.validate()  # before anything is patched: all or nothing
        specs += sim.specs()
    hooks = REGISTRY.apply(specs)
    if sim is not None:
        sim.enable(config.simulate_acceptance)
    _applied_in_process.extend(hooks)
    logger.info("sglang_patches: applied %d hooks (%s) in pid-local SGLang %s", len(hooks),
                ",".join(config.patches), installed_sglang_version())
    return hooks


def undo_overlay() -> int:
    """Undo every hook and every recorded change (instance attributes, globals such as the
    simulation switch, weights)."""
    n = REGISTRY.undo()
    _applied_in_process.clear()
    return n


def cli_main(argv: list[str]) -> int:
    from sglang_patches.versions import support_line

    parser = OneLineParser(
        prog="sglang-patches patches",
        description="Resolve every hook of the chosen features against the installed SGLang and list "
                    "them (nothing is patched). Exit 1 if a target is missing. " + support_line() + ".")
    parser.add_argument("--patches", default=None,
                        help=f"features: all (= {', '.join(FEATURES)}, the default), none, or a comma list of those and "
                             f"the opt-in {', '.join(OPTIONAL_FEATURES)}; with --contacts: only theirs and SGLang-wide "
                             "(core) ones (default: every feature's)")
    parser.add_argument("--against-source", metavar="SITE_DIR",
                        help="check the targets statically (AST, no import) in the sglang found under SITE_DIR, "
                             "e.g. a `pip install --no-deps --target SITE_DIR sglang==0.5.23`")
    parser.add_argument("--contacts", action="store_true",
                        help="list every SGLang contact point of every feature (hooks, entry-point parameters, "
                             "routes and state, swapped globals and attributes, replaced weights, AST "
                             "fingerprints) as OK/BAD, checked by AST against the installed SGLang's files or "
                             "--against-source; exit 1 if one is BAD")
    args = parser.parse_args(argv)
    features = parse_patch_list("all" if args.patches is None else args.patches)
    if args.contacts:
        return _contacts_main(args.against_source, None if args.patches is None else features)
    if args.against_source:
        return _static_main(args.against_source, features)
    from sglang_patches.versions import check_sglang_version

    version = installed_sglang_version()
    if version == "not installed":
        raise UserError("sglang is not installed in this environment; install sglang==0.5.17 (see README)")
    warning = check_sglang_version(version)
    print(f"sglang {version}" + (f"  (warning: {warning})" if warning else ""))
    specs = specs_for(features)
    REGISTRY.validate(specs)  # raises PatchTargetError (one line, exit 2) on a missing target
    for spec in specs:
        print(f"  {spec.feature:<8} {spec.kind:<6} {spec.target}")
    for name in [f for f in features if f not in {s.feature for s in specs}]:
        why = nothing_to_do(name)
        if why:
            print(f"  {name}: {why}")
    print(f"{len(specs)} hooks in features: {', '.join(features) or 'none'}")
    return 0


def _check_site(site: str) -> None:
    """--against-source names the folder that holds the `sglang` package (site-packages, a --target dir)."""
    import os

    if os.path.isdir(os.path.join(site, "sglang")):
        return
    if os.path.basename(os.path.normpath(site)) == "sglang" and os.path.isfile(os.path.join(site, "__init__.py")):
        raise UserError(f"--against-source {site}: that is the sglang package itself; pass the folder that holds it, "
                        f"{os.path.dirname(os.path.normpath(site)) or '.'}")
    raise UserError(f"--against-source {site}: no sglang package there; "
                    f"create it with `pip install --no-deps --target {site} sglang==VERSION`")


def _static_main(site: str, features) -> int:
    from sglang_patches.compat.static_targets import check_all, sglang_version_at

    _check_site(site)
    from sglang_patches import compat

    version = sglang_version_at(site)
    mod, exact = compat.resolve(version)
    with compat.pinned(mod, version):  # the hooks that version's compat file declares, not the installed one's
        specs = specs_for(features)
        idle = {f: nothing_to_do(f) for f in features if f not in {s.feature for s in specs}}
    nearest = "" if exact else f", the nearest lower compat file: sglang {version} was not tested"
    print(f"sglang {version} at {site}: hooks of {mod.__name__.rsplit('.', 1)[1]}{nearest} (static check, nothing imported)")
    results = check_all(site, specs)
    for spec, r in zip(specs, results):  # the feature column, as --print-patches and the contact list show it
        print(f"  {'ok ' if r.ok else 'BAD'} {spec.feature:<15} {r.target}  ({r.detail})")
    for name, why in idle.items():
        if why:
            print(f"  {name}: {why}")
    bad = [r for r in results if not r.ok]
    print(f"{len(results) - len(bad)}/{len(results)} targets resolve in sglang {version}")
    return 1 if bad else 0


def _contacts_main(site: str | None, only=None) -> int:
    from sglang_patches import compat
    from sglang_patches.compat.static_targets import sglang_version_at

    if site is not None:
        _check_site(site)
        version, where = sglang_version_at(site), site
    else:
        site = compat.installed_site()
        if site is None:
            raise UserError("sglang is not installed in this environment; install sglang==0.5.17 "
                            "or pass --against-source DIR")
        version, where = installed_sglang_version(), f"{site} (installed)"
    mod, exact = compat.resolve(version)
    nearest = "" if exact else f", the nearest lower compat file: sglang {version} was not tested"
    print(f"sglang {version} at {where}: contact points of {mod.__name__.rsplit('.', 1)[1]}{nearest} "
          "(static check, nothing imported)")
    cache: dict = {}
    bad_by_feature: dict[str, int] = {}
    contacts = [ct for ct in mod.contacts() if only is None or ct.feature == "core" or ct.feature in only]
    if only is not None:
        print(f"features: core, {', '.join(only) or 'none'} (--patches)")
    for ct in contacts:
        ok, detail = ct.check_static(site, cache)
        if not ok:
            bad_by_feature[ct.feature] = bad_by_feature.get(ct.feature, 0) + 1
        undo = f"; undo: {ct.undo}" if ct.undo else ""
        print(f"  {'OK ' if ok else 'BAD'} {ct.feature:<12} {ct.kind:<11} {ct.target}  ({detail}{undo})")
    for feature, n in bad_by_feature.items():
        refused = compat.feature_refusal(feature, version)
        print(f"{feature}: {n} BAD" + (f" (the feature is refused on this version: {refused})" if refused else ""))
    n_bad = sum(bad_by_feature.values())
    print(f"{len(contacts) - n_bad}/{len(contacts)} contact points OK in sglang {version}")
    return 1 if n_bad else 0
