"""`sglang-patches preflight`: check a target + drafter pair before launching SGLang (no GPU, no torch).

Takes what a user types: SGLang's flag names (the whole serve command may be pasted: a leading
`python -m sglang.launch_server` / `sglang serve` / `python -m sglang_patches.launch` is dropped,
a `--config FILE` stands for the flags of its YAML file, as SGLang reads it, the launcher's
`--fixture NAME` stands for the fixture's model flags, and the other launcher and
SGLang flags preflight does not need are ignored and named in one note line), local directories or
hub ids found in the local Hugging Face cache (offline). Reads config.json files and safetensors headers only; writes nothing.
"""
from __future__ import annotations

import sys
from typing import NoReturn

import argparse

from sglang_patches.errors import UserError
from sglang_patches.offline.preflight.command import dummy_fixture, fixture_flags, split_overlay
from sglang_patches.offline.preflight.rules import CODES

DESCRIPTION = """\
Check a target model and a speculative drafter for EAGLE / EAGLE-3 hidden-state mismatches before
launching SGLang, and for the usual reasons a drafter accepts nothing (dummy weights, a quantised
target). Models: local checkpoint directories or Hugging Face hub ids already in the local cache
(HF_HUB_CACHE / HF_HOME; never downloaded). Paste the whole serve command if you like: SGLang
and launcher flags preflight does not need are ignored and named in one note line; the launcher's
--fixture NAME checks that fixture as built in the fixture cache. Reads only config.json and
safetensors headers; imports neither torch nor SGLang, needs no GPU, writes nothing.
"""

EPILOG = "findings (error unless marked warning):\n" + "".join(
    f"  {code}  {text}\n" for code, text in CODES.items()) + """
examples:
  sglang-patches preflight --model-path meta-llama/Llama-3.1-8B-Instruct \\
      --speculative-draft-model-path yuhuili/EAGLE3-LLaMA3.1-Instruct-8B --speculative-algorithm EAGLE3
  sglang-patches preflight python -m sglang.launch_server --model-path ... (the whole serve command)
  sglang-patches preflight --fixture llama3-8b

exit codes:
  0  compatible (no errors; warnings may be printed)
  1  problems found (at least one error finding)
  2  unusable input (missing directory, a hub id not in the local cache, bad config.json,
     corrupt or truncated safetensors, a bad flag value); one line on stderr
"""


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad flags as a one-line UserError (exit 2) instead of usage + error."""

    def error(self, message: str) -> NoReturn:  # noqa: F821
        raise UserError(f"preflight: {message} (see `sglang-patches preflight --help`)")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="sglang-patches preflight", description=DESCRIPTION, epilog=EPILOG,
                formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    p.add_argument("--model-path", "--model", "--target", dest="model_path", metavar="DIR|HUB_ID",
                   help="required: the target model: a checkpoint directory or a hub id in the local cache")
    p.add_argument("--speculative-draft-model-path", "--speculative-draft-model", "--draft", dest="draft_path",
                   metavar="DIR|HUB_ID", help="required: the drafter (config.json + safetensors), as --model-path")
    p.add_argument("--speculative-algorithm", dest="algorithm", metavar="ALGO",
                   help="as passed to SGLang: EAGLE, EAGLE3, NEXTN, ... (default: the one the drafter needs, "
                        "said in a note)")
    p.add_argument("--speculative-num-steps", dest="steps", type=int, metavar="N")
    p.add_argument("--speculative-eagle-topk", dest="topk", type=int, metavar="K")
    p.add_argument("--speculative-num-draft-tokens", dest="draft_tokens", type=int, metavar="N")
    p.add_argument("--revision", metavar="REV", help="the target's revision in the cache (default main)")
    p.add_argument("--speculative-draft-model-revision", dest="draft_revision", metavar="REV",
                   help="the drafter's revision in the cache (default main)")
    p.add_argument("--load-format", dest="load_format", metavar="FMT", help="SGLang's; 'dummy' is reported (SP010)")
    p.add_argument("--speculative-draft-load-format", dest="draft_load_format", metavar="FMT",
                   help="SGLang's (default: --load-format)")
    p.add_argument("--quantization", metavar="Q", help="SGLang's; a quantised target is reported (SP011)")
    p.add_argument("--speculative-draft-model-quantization", dest="draft_quantization", metavar="Q",
                   help="SGLang's (default: --quantization)")
    p.add_argument("--json", action="store_true", help="print the result as JSON instead of text")
    return p


# leading words of a pasted serve command: `python -m sglang.launch_server`, `sglang serve`, the launcher
_LAUNCHERS = ("sglang.launch_server", "sglang_patches.launch", "sglang_patches")


def strip_command(argv: list[str]) -> list[str]:
    """argv without a pasted serve command's leading program words (`python3 -m sglang.launch_server`,
    `sglang serve`, `python -m sglang_patches.launch`, `sglang-patches preflight`)."""
    out = list(argv)
    if out and (out[0].rsplit("/", 1)[-1].startswith("python")):
        out = out[1:]
        if out[:1] == ["-m"] and len(out) > 1:
            out = out[2:] if out[1] in _LAUNCHERS or out[1].startswith("sglang") else out
    if out[:2] == ["sglang", "serve"] or (out[:1] and out[0].rsplit("/", 1)[-1] == "sglang" and out[1:2] == ["serve"]):
        out = out[2:]
    if out[:2] == ["sglang-patches", "preflight"]:
        out = out[2:]
    return out


def ignored_flags(unknown: list[str]) -> list[str]:
    """The flag names among argparse's leftovers (their values are left out)."""
    return list(dict.fromkeys(u.split("=", 1)[0] for u in unknown if u.startswith("-") and u not in ("-", "--")))


NEAR = 0.85  # difflib ratio above which an unknown flag is taken for a typo of one preflight reads


def near_miss(flag: str, ours: list[str]) -> str | None:
    """The preflight flag `flag` abbreviates (`--speculative-algo`: SGLang would take it) or is one or two
    letters off (`--speculative-algoritm`); None for any other flag. No SGLang flag of the supported
    versions is either (a test holds that on each version's real parser), so this needs no SGLang."""
    import difflib

    if not flag.startswith("--"):
        return None
    whole = [o for o in ours if o.startswith(flag) and o != flag]
    if len(whole) == 1:
        return whole[0]
    match = difflib.get_close_matches(flag, ours, 1, NEAR)
    return match[0] if match else None


def refuse_near_misses(parser: argparse.ArgumentParser, ignored: list[str]) -> None:
    """Refuse an ignored flag that is a near miss of one preflight reads: ignoring it would check another
    configuration than the one typed (`--speculative-algoritm EAGLE` checked as EAGLE3 and passed)."""
    ours = [o for o in parser._option_string_actions if o.startswith("--") and o != "--help"]
    for flag in ignored:
        match = near_miss(flag, ours)
        if match is not None and match.startswith(flag):
            parser.error(f"{flag} abbreviates {match}; write it out, preflight reads its flags by their full names")
        if match is not None:
            parser.error(f"{flag} is neither an SGLang flag nor one preflight reads; did you mean {match}?")


def expand_config(argv: list[str]) -> list[str]:
    """A pasted command's `--config FILE` replaced by the flags of the YAML file, as SGLang reads it
    (launch_args.with_sglang_config), so model paths given only there are checked. Every YAML boolean
    is taken as a bare flag (true) or none (false): preflight reads no boolean flag, and telling
    SGLang's store_true flags apart would import SGLang's parser (torch)."""
    from sglang_patches.launch_args import EveryKeyStoreTrue, with_sglang_config

    return with_sglang_config(argv, store_true=EveryKeyStoreTrue())


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = strip_command(list(sys.argv[1:] if argv is None else argv))
    if "-h" in argv or "--help" in argv:
        overlay, fixture, fixture_note = [], None, None
    else:  # the launcher's own flags (a pasted `python -m sglang_patches.launch` command)
        argv, overlay, fixture = split_overlay(argv)
        argv = expand_config(argv)
        fixture_note = None
        if fixture is not None:
            extra, fixture_note = fixture_flags(fixture, argv)
            argv = argv + extra
    try:
        args, unknown = parser.parse_known_args(argv)
    except SystemExit as exc:  # only --help gets here; errors raise UserError
        return int(exc.code or 0)
    ignored = ignored_flags(unknown)
    refuse_near_misses(parser, ignored)
    stray = [u for u in unknown if not u.startswith("-")] if not ignored else []
    if stray:  # words that are no flag's value: a path typed without its flag
        parser.error(f"unrecognized arguments: {' '.join(stray)}")
    kinds = [(kind, names) for kind, names in (("overlay", overlay), ("SGLang (or unknown)", ignored)) if names]
    missing = [flag for flag, value in (("--model-path", args.model_path),
                                        ("--speculative-draft-model-path", args.draft_path)) if value is None]
    if missing:
        why = "; ".join(f"as {kind} flags preflight does not need: {', '.join(names)}" for kind, names in kinds)
        parser.error(f"the following arguments are required: {', '.join(missing)}" + (f" (ignored {why})" if why else ""))
    if fixture_note:
        print(f"sglang-patches: note: {fixture_note}", file=sys.stderr)
    if kinds:
        print("sglang-patches: note: " + "; ".join(f"ignored {kind} flags preflight does not need: "
                                                   f"{', '.join(names)}" for kind, names in kinds), file=sys.stderr)

    if args.load_format is None and args.draft_load_format is None:
        name = dummy_fixture(args.model_path, args.draft_path)
        if name is not None:  # served with dummy weights by the launcher: checked the same way
            args.load_format = "dummy"
            print(f"sglang-patches: note: {args.model_path} and {args.draft_path} are the dummy-weight fixture "
                  f"{name}: checked as --load-format dummy, as the launcher serves it", file=sys.stderr)

    from sglang_patches.offline.preflight import run_preflight

    result = run_preflight(args.model_path, args.draft_path, args.algorithm,
                           steps=args.steps, topk=args.topk, draft_tokens=args.draft_tokens,
                           revision=args.revision, draft_revision=args.draft_revision,
                           load_format=args.load_format, draft_load_format=args.draft_load_format,
                           quantization=args.quantization, draft_quantization=args.draft_quantization)
    print(result.to_json() if args.json else result.format_text())
    return result.exit_code


if __name__ == "__main__":
    from sglang_patches.errors import exit_with

    try:
        raise SystemExit(main(sys.argv[1:]))
    except UserError as err:
        exit_with(err)
