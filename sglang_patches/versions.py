"""Supported SGLang versions and the `sglang-patches version` subcommand."""
from __future__ import annotations

import json
import os
import platform

from sglang_patches import compat
from sglang_patches.cliargs import OneLineParser
from sglang_patches.errors import UserError

__version__ = "0.1.0"

# Which SGLang versions the overlay ran with on a GPU (TESTED), which were verified on CPU only, and
# which it accepts: declared by the compat files (sglang_patches/compat/), the one place that knows
# SGLang versions.
TESTED = compat.gpu_ran()
CPU_VERIFIED = compat.cpu_verified()
ACCEPTED_RANGE = compat.accepted_range()
ALLOW_ENV = "SGLANG_PATCHES_ALLOW_UNSUPPORTED"
# What a CPU-verified version has not had: a run on a GPU, or one of every feature (its compat file's
# GPU_PARTLY says what ran).
CPU_ONLY_WHY = "not yet run on a GPU"


def gpu_words(version: str) -> str:
    """What a CPU-verified version has had on a GPU, in the words of docs/status.md's version table."""
    return compat.gpu_partly(version) or CPU_ONLY_WHY


def support_line() -> str:
    """One line for --help and messages; docs/status.md's version table says the same."""
    lo, hi = ACCEPTED_RANGE
    cpu = ", ".join(f"{v} {'partly on a GPU' if compat.gpu_partly(v) else 'on CPU only'}" for v in CPU_VERIFIED)
    return (f"SGLang {lo} to {hi}: {', '.join(TESTED)} run on a GPU, {cpu} (`sglang-patches version` says what "
            f"ran), those between accepted; others refused unless {ALLOW_ENV}=1")


def status_of(version: str) -> str:
    """What `sglang-patches version` prints on its `status` line for `version`: the words of the
    status column of docs/status.md's version table."""
    if version in TESTED:
        return "ran on a GPU"
    if version in CPU_VERIFIED:
        return f"verified on CPU on its real classes; {gpu_words(version)}"
    parsed = compat.parse_version(version)
    if parsed is None:
        return "not installed" if version == "not installed" else f"unreadable version {version!r}"
    lo, hi = (compat.parse_version(v) for v in ACCEPTED_RANGE)
    if lo <= parsed <= hi:
        return "accepted with a warning, not tested"
    return f"refused unless {ALLOW_ENV}=1"


def check_sglang_version(version: str) -> str | None:
    """None if it ran on a GPU, a warning string if merely accepted; raise UserError if unsupported.

    A version with its own compat file: None (GPU-run) or a warning saying it was verified on CPU
    only. A version between two compat files: a warning naming the file used (the nearest lower)
    and that the version was not tested. Outside the range: refused, unless ALLOW_ENV=1."""
    if version in TESTED:
        return None
    mod, exact = compat.resolve(version)
    file = compat.file_name(mod)
    parsed = compat.parse_version(version)
    lo, hi = (compat.parse_version(v) for v in ACCEPTED_RANGE)
    if parsed is not None and lo <= parsed <= hi:
        if version in CPU_VERIFIED:
            return (f"sglang {version} was verified on CPU on its real classes; {gpu_words(version)} (GPU-tested: "
                    f"{', '.join(TESTED)}; docs/status.md); contact points from {file}")
        if exact:  # e.g. a .post release of a covered version: same compat file, not itself run
            return (f"sglang {version} has not run with sglang_patches itself (GPU-tested: "
                    f"{', '.join(TESTED)}; CPU-verified: {', '.join(CPU_VERIFIED)}); contact points from {file}")
        return (f"sglang {version} was not tested with sglang_patches; using {file} (the nearest lower "
                f"compat file, sglang {mod.COVERS[1]}); its contact points are checked at start")
    if os.environ.get(ALLOW_ENV) == "1":
        return f"sglang {version} is unsupported; continuing with {file} because {ALLOW_ENV}=1"
    raise UserError(
        f"sglang {version} has no compat file in sglang_patches {__version__} (covered: "
        f"{compat.covered_versions()}; versions between through the nearest lower file); install "
        f"sglang=={TESTED[0]} or set {ALLOW_ENV}=1 to try anyway"
    )


def collect() -> dict:
    from sglang_patches.server.hooks import installed_sglang_version

    info = {"sglang_patches": __version__, "python": platform.python_version(),
            "sglang": installed_sglang_version(), "torch": None, "cuda": None, "gpus": []}
    try:
        import torch

        info["torch"] = torch.__version__
        info["cuda"] = torch.version.cuda
        if torch.cuda.is_available():
            info["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    except ImportError:
        pass
    return info


def cli_main(argv: list[str]) -> int:
    parser = OneLineParser(prog="sglang-patches version",
                           description="Print overlay, SGLang (and its support status), torch, CUDA and GPU versions. " + support_line() + ".")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    items = list(collect().items())
    # the installed SGLang's support status right after its version, in docs/status.md's words
    at = [key for key, _ in items].index("sglang") + 1
    items.insert(at, ("status", status_of(items[at - 1][1])))
    info = dict(items)
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        for key, value in info.items():
            if key == "gpus":
                value = ", ".join(value) if value else "none visible"
            if key == "status":  # the installed SGLang version's, indented under it: not this machine's
                print(f"  {'support':<13} {value} (this SGLang version with sglang_patches; docs/status.md)")
                continue
            print(f"{key:<15} {value}")
    return 0
