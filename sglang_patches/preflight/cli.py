"""`sglang-patches preflight`: check a target + drafter pair before launching SGLang (no GPU, no torch).

Takes the same flag names as `python -m sglang.launch_server`, so the launch line can be reused.
Reads config.json files and safetensors headers only; writes nothing.
"""
from __future__ import annotations

from typing import NoReturn

import argparse

from sglang_patches.errors import UserError
from sglang_patches.preflight.rules import CODES

DESCRIPTION = """\
Check a target model and a speculative drafter for EAGLE / EAGLE-3 hidden-state mismatches before
launching SGLang. Reads only config.json and safetensors headers of local checkpoint directories;
imports neither torch nor SGLang, needs no GPU, writes nothing.
"""

EPILOG = "findings (error unless marked warning):\n" + "".join(
    f"  {code}  {text}\n" for code, text in CODES.items()) + """
exit codes:
  0  compatible (no errors; warnings may be printed)
  1  problems found (at least one error finding)
  2  unusable input (missing directory, bad config.json, corrupt or truncated safetensors,
     unknown flag); one line on stderr
"""


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad flags as a one-line UserError (exit 2) instead of usage + error."""

    def error(self, message: str) -> NoReturn:  # noqa: F821
        raise UserError(f"preflight: {message} (see `sglang-patches preflight --help`)")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="sglang-patches preflight", description=DESCRIPTION, epilog=EPILOG,
                formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    p.add_argument("--model-path", "--model", dest="model_path", metavar="DIR",
                   help="required: target model checkpoint directory (with config.json)")
    p.add_argument("--speculative-draft-model-path", "--speculative-draft-model", dest="draft_path",
                   metavar="DIR", help="required: drafter checkpoint directory (config.json + safetensors)")
    p.add_argument("--speculative-algorithm", dest="algorithm", metavar="ALGO",
                   help="required: as passed to SGLang: EAGLE, EAGLE3, NEXTN, ...")
    p.add_argument("--speculative-num-steps", dest="steps", type=int, metavar="N")
    p.add_argument("--speculative-eagle-topk", dest="topk", type=int, metavar="K")
    p.add_argument("--speculative-num-draft-tokens", dest="draft_tokens", type=int, metavar="N")
    p.add_argument("--json", action="store_true", help="print the result as JSON instead of text")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args, unknown = parser.parse_known_args(argv)
    except SystemExit as exc:  # only --help gets here; errors raise UserError
        return int(exc.code or 0)
    if unknown:  # report a typo'd flag before any "required" complaint it may have caused
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    missing = [flag for flag, value in (("--model-path", args.model_path),
                                        ("--speculative-draft-model-path", args.draft_path),
                                        ("--speculative-algorithm", args.algorithm)) if value is None]
    if missing:
        parser.error(f"the following arguments are required: {', '.join(missing)}")

    from sglang_patches.preflight import run_preflight

    result = run_preflight(args.model_path, args.draft_path, args.algorithm,
                           steps=args.steps, topk=args.topk, draft_tokens=args.draft_tokens)
    print(result.to_json() if args.json else result.format_text())
    return result.exit_code


if __name__ == "__main__":
    import sys

    from sglang_patches.errors import exit_with

    try:
        raise SystemExit(main(sys.argv[1:]))
    except UserError as err:
        exit_with(err)
