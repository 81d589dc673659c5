"""Supported SGLang versions and the `sglang-patches version` subcommand."""
from __future__ import annotations

import json
import os
import platform

from sglang_patches.cliargs import OneLineParser
from sglang_patches.errors import UserError

__version__ = "0.1.0"

# Run on the GPU machine (0.5.17) and resolved on CPU in CI (0.5.17; 0.5.23 targets checked with
# tests/test_targets_0523.py when that env is built). Hook-point names were also checked stable in
# 0.5.18-0.5.20 (../shared/docs/sglang-eagle-internals.md), so those are accepted with a warning.
TESTED = ("0.5.17", "0.5.23")
ACCEPTED_RANGE = ((0, 5, 17), (0, 5, 23))
ALLOW_ENV = "SGLANG_PATCHES_ALLOW_UNSUPPORTED"


def _parse(v: str) -> tuple[int, ...]:
    out = []
    for part in v.split(".")[:3]:
        digits = "".join(ch for ch in part if ch.isdigit())
        if not digits:
            break
        out.append(int(digits))
    return tuple(out)


def check_sglang_version(version: str) -> str | None:
    """Return None if tested, a warning string if merely accepted; raise UserError if unsupported."""
    if version in TESTED:
        return None
    parsed = _parse(version)
    lo, hi = ACCEPTED_RANGE
    if parsed and lo <= parsed <= hi:
        return f"sglang {version} is not tested with sglang_patches (tested: {', '.join(TESTED)}); hook points are checked at start"
    if os.environ.get(ALLOW_ENV) == "1":
        return f"sglang {version} is unsupported; continuing because {ALLOW_ENV}=1"
    raise UserError(
        f"sglang {version} is not supported by sglang_patches {__version__} (supported: "
        f"{'.'.join(map(str, lo))} to {'.'.join(map(str, hi))}, tested {', '.join(TESTED)}); install "
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
                                     description="Print overlay, SGLang, torch, CUDA and GPU versions.")
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
