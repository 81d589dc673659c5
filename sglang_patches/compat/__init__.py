"""SGLang version knowledge in one place: which compat file serves which SGLang, and one version parser.

Each supported SGLang version has one file here (`v0_5_17.py`, `v0_5_23.py`) that declares every
contact point of every feature (`Contact`s), the versions it covers (`COVERS`) and how they were
verified: end to end on a GPU (`GPU_RAN`) or by the CPU test suite on the version's real classes
(`CPU_VERIFIED`). `for_version(v)` picks the file whose COVERS holds v, else the nearest lower one
(`resolve(v)` also says whether v itself was covered); `current()` does so for the installed SGLang.
A new SGLang version is one new file registered in `FILES` (oldest first) plus its tests; it imports
by name what it keeps unchanged from the file before it and declares only what differs (v0_5_23.py).
"""
from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import os
import re

FILES = ("v0_5_17", "v0_5_23")  # oldest first

_RELEASE = re.compile(r"^\s*v?(\d+)(?:\.(\d+))?(?:\.(\d+))?")


def parse_version(text: str) -> tuple[int, int, int] | None:
    """The release numbers of a version string, padded to three: "0.5.17.post1" and "0.5.17rc1" ->
    (0, 5, 17); "0.6" -> (0, 6, 0); None when it does not start with a number ("not installed")."""
    m = _RELEASE.match(text or "")
    if not m:
        return None
    return tuple(int(g) if g is not None else 0 for g in m.groups())  # type: ignore[return-value]


def _module(name: str):
    return importlib.import_module(f"sglang_patches.compat.{name}")


def files():
    return [_module(name) for name in FILES]


def covered(version: str, module) -> bool:
    v = parse_version(version)
    lo, hi = (parse_version(x) for x in module.COVERS)
    return v is not None and lo <= v <= hi


def resolve(version: str):
    """(compat file, exact) for `version`: the file whose COVERS holds it (exact True), else the
    newest one older than it, else the oldest (exact False; the version check decides separately
    whether such a version may run)."""
    mods = files()
    v = parse_version(version)
    for mod in mods:
        if covered(version, mod):
            return mod, True
    older = [m for m in mods if v is not None and parse_version(m.COVERS[0]) <= v]
    return (older[-1] if older else mods[0]), False


def for_version(version: str):
    return resolve(version)[0]


def file_name(module) -> str:
    """The compat file's path inside the package, e.g. sglang_patches/compat/v0_5_17.py."""
    return module.__name__.replace(".", "/") + ".py"


def covered_versions() -> str:
    """One phrase listing what the compat files cover, e.g. "0.5.17 (ran on a GPU), 0.5.23
    (verified on CPU on its real classes)"."""
    out = []
    for m in files():
        lo, hi = m.COVERS
        span = lo if lo == hi else f"{lo} to {hi}"
        how = ("ran on a GPU" if lo in m.GPU_RAN else "verified on CPU on its real classes"
               if lo in m.CPU_VERIFIED else "not verified")
        out.append(f"{span} ({how})")
    return ", ".join(out)


@functools.lru_cache(maxsize=None)
def _current(version: str):
    return for_version(version)


_PINNED: list = []  # set by pinned(): (compat file, version) that current() / current_version() answer


def current():
    """The compat file for the installed SGLang (the oldest file when SGLang is not installed), or the
    one pinned() holds."""
    if _PINNED:
        return _PINNED[-1][0]
    from sglang_patches.server.hooks import installed_sglang_version

    return _current(installed_sglang_version())


def current_version() -> str:
    """The installed SGLang's version, or the one pinned() holds: what a feature's version refusal reads."""
    if _PINNED and _PINNED[-1][1] is not None:
        return _PINNED[-1][1]
    from sglang_patches.server.hooks import installed_sglang_version

    return installed_sglang_version()


@contextlib.contextmanager
def pinned(module, version: str | None = None):
    """Inside the block current() is `module` (and current_version() `version`, when given): the hook
    builders then declare that version's targets, so a static check against another version's source
    lists what would be installed there (nothing of that version is imported; the installed SGLang is
    not touched)."""
    _PINNED.append((module, version))
    try:
        yield module
    finally:
        _PINNED.pop()


def gpu_ran() -> tuple[str, ...]:
    return tuple(v for m in files() for v in m.GPU_RAN)


def cpu_verified() -> tuple[str, ...]:
    return tuple(v for m in files() for v in m.CPU_VERIFIED)


def gpu_partly(version: str) -> str:
    """For a CPU-verified version: what of it has run on a GPU ("" when nothing has)."""
    return next((m.GPU_PARTLY for m in files() if version in m.CPU_VERIFIED), "")


def accepted_range() -> tuple[str, str]:
    mods = files()
    return mods[0].COVERS[0], mods[-1].COVERS[1]


def feature_refusal(feature: str, version: str) -> str | None:
    """Why `feature` cannot run on this SGLang version, or None."""
    if parse_version(version) is None:
        return f"sglang is {version}"
    mod = for_version(version)
    refused = getattr(mod, "FEATURE_REFUSED_FROM", {}).get(feature)
    if refused and parse_version(version) >= parse_version(refused[0]):
        return refused[1].format(v=version)
    return None


PP_FLAGS = ("--pp-size", "--pipeline-parallel-size")
ENV_TRUE = ("true", "1", "yes", "y")  # what SGLang's EnvBool reads as true (sglang/srt/environ.py)


def setting_refusal(version: str, features, *, pp_size: int | None, environ) -> str | None:
    """One line refusing a setting of this SGLang that one of `features` cannot follow yet (the
    compat file's REFUSED), or None. `pp_size` None: not known here (only the environment is read)."""
    if parse_version(version) is None:
        return None
    for r in getattr(for_version(version), "REFUSED", ()):
        if r.feature not in features:
            continue
        if r.setting in PP_FLAGS:
            if pp_size is not None and pp_size > 1:
                return (f"{r.setting} {pp_size} with the {r.feature} feature is refused on sglang {version}: "
                        f"{r.why}; {r.fix}")
        elif (environ.get(r.setting) or "").lower() in ENV_TRUE:
            return (f"{r.setting}={environ[r.setting]} with the {r.feature} feature is refused on sglang "
                    f"{version}: {r.why}; {r.fix}")
    return None


def installed_site() -> str | None:
    """The directory that holds the installed `sglang` package (found without importing it)."""
    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.dirname(list(spec.submodule_search_locations)[0])
