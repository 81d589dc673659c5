"""Supported SGLang versions and the `sglang-patches version` subcommand."""
from __future__ import annotations

import json
import os
import platform

from sglang_patches import compat
from sglang_patches.cliargs import OneLineParser
from sglang_patches.errors import UserError

__version__ = "0.1.0"

# Which SGLang versions the overlay ran with on a GPU (TESTED) and which it accepts: declared by the
# compat files (sglang_patches/compat/), the one place that knows SGLang versions.
TESTED = compat.gpu_ran()
STATIC_CHECKED = compat.static_checked()
ACCEPTED_RANGE = compat.accepted_range()
ALLOW_ENV = "SGLANG_PATCHES_ALLOW_UNSUPPORTED"


def support_line() -> str:
    """One line for --help and messages; the README's version table says the same."""
    lo, hi = ACCEPTED_RANGE
    return (f"sglang {', '.join(TESTED)} ran on a GPU; {', '.join(STATIC_CHECKED)} had its sources checked "
            f"statically; {lo} to {hi} accepted (others refused unless {ALLOW_ENV}=1)")


def check_sglang_version(version: str) -> str | None:
    """Return None if it ran on a GPU, a warning string if merely accepted; raise UserError if unsupported."""
    if version in TESTED:
        return None
    parsed = compat.parse_version(version)
    lo, hi = (compat.parse_version(v) for v in ACCEPTED_RANGE)
    if parsed is not None and lo <= parsed <= hi:
        how = "its sources were checked statically" if version in STATIC_CHECKED else "not checked"
        return (f"sglang {version} has not run with sglang_patches on a GPU ({how}; GPU-tested: "
                f"{', '.join(TESTED)}); hook points are checked at start")
    if os.environ.get(ALLOW_ENV) == "1":
        return f"sglang {version} is unsupported; continuing because {ALLOW_ENV}=1"
    raise UserError(
        f"sglang {version} is not supported by sglang_patches {__version__} (supported: "
        f"{ACCEPTED_RANGE[0]} to {ACCEPTED_RANGE[1]}, GPU-tested {', '.join(TESTED)}); install "
        f"sglang=={TESTED[0]} or set {ALLOW_ENV}=1 to try anyway"
    )


def collect() -> dict:
    from sglang_patches.hooks import installed_sglang_version

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
                           description="Print overlay, SGLang, torch, CUDA and GPU versions. " + support_line() + ".")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    info = collect()
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        for key, value in info.items():
            if key == "gpus":
                value = ", ".join(value) if value else "none visible"
            print(f"{key:<15} {value}")
    return 0
