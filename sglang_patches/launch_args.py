"""Overlay flags of the drop-in launcher, separated from SGLang's own flags."""
from __future__ import annotations

import argparse
import dataclasses

from sglang_patches.cliargs import OneLineParser, finite_float
from sglang_patches.errors import UserError
from sglang_patches.vocab.overlay_config import (DRAFT_BACKENDS, DRAFT_TP_WITHOUT_SIZE, DRAFT_WEIGHTS, FEATURES,
                                                 FP8_WITHOUT_TRITON, ON_ACCEPT_COLLAPSE, OverlayConfig, field_problem,
                                                 is_fp8, parse_patch_list)

GROUP_TITLE = "sglang_patches overlay options"
GROUP_DESC = ("Added by the overlay; every other flag is SGLang's and passes through unchanged. "
              "The overlay runs preflight before anything is spawned and patches every scheduler process. "
              "Examples: `python -m sglang_patches.launch --fixture llama3-8b --timing-log cycles.jsonl`; "
              "`python -m sglang_patches.launch --model-path M --speculative-algorithm EAGLE3 "
              "--speculative-draft-model-path D --speculative-num-steps 3 --speculative-eagle-topk 1 "
              "--speculative-num-draft-tokens 4 --timing-log cycles.jsonl`")


def add_overlay_args(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group(GROUP_TITLE, GROUP_DESC)
    g.add_argument("--patches", default="all",
                   help=f"overlay features to enable: all (default), none, or a comma list of {', '.join(FEATURES)}; "
                        "'-name' drops one, e.g. all,-checks; opt-in: step_timing (GPU ms of every "
                        "no-speculation step into --timing-log, for baselines), e.g. all,step_timing; adaptive_graphs "
                        "(SGLang 0.5.17 under --speculative-adaptive: CUDA graphs for every candidate's draft-extend, "
                        "which 0.5.17 runs eagerly on all but the start steps) comes with all when --speculative-adaptive "
                        "is given, all,-adaptive_graphs leaves it out; draft_tp and "
                        "triton_draft are enabled by --draft-tp-size and --draft-backend triton")
    g.add_argument("--print-patches", action="store_true",
                   help="print what would be patched for the installed SGLang, the features that --draft-tp-size, "
                        "--draft-backend triton and --speculative-adaptive bring included, and exit")
    g.add_argument("--fixture", metavar="NAME", default=None,
                   help="serve a built-in model fixture (e.g. llama3-8b with dummy weights, or trained); "
                        "fills --model-path, the drafter and EAGLE3 flags unless given. See `sglang-patches fixtures list`")
    g.add_argument("--timing-log", metavar="PATH", default=None,
                   help="append one JSON line per speculation cycle (draft/verify/extend GPU ms, accepted drafts) to "
                        "PATH; an existing file is continued, not replaced")
    g.add_argument("--timing-log-max-mb", type=finite_float, default=256.0, help="rotate the timing log past this size (MB)")
    g.add_argument("--timing-all-ranks", action="store_true",
                   help="every TP rank records (rank r>0 writes PATH with .rank{r}); default: rank 0 only")
    g.add_argument("--timing-summary-interval", type=int, default=500, metavar="N",
                   help="log a phase-share / accept-length summary every N decode cycles (0 = off)")
    g.add_argument("--accept-collapse-window", type=int, default=256, metavar="N",
                   help="decode cycles in the accept-collapse alarm's rolling window (default 256; needs the timing feature)")
    g.add_argument("--accept-collapse-threshold", type=finite_float, default=None, metavar="X",
                   help="alarm when the rolling accept length (accepted drafts + 1) falls below X "
                        "(default 1.1 at steps >= 2, off at steps 1; an explicit X applies at every steps)")
    g.add_argument("--on-accept-collapse", choices=ON_ACCEPT_COLLAPSE, default="warn",
                   help="on an accept-length collapse: warn (one WARNING with likely causes, a Prometheus gauge and "
                        "a /spec_timing field; default), exit (also stop the server at once; the launcher exits with "
                        "code 3), off. Silent while acceptance "
                        "is simulated (SGLANG_SIMULATE_ACC_LEN)")
    g.add_argument("--skip-preflight", action="store_true",
                   help="do not run preflight before spawning (the in-server load-time and runtime checks still run)")
    g.add_argument("--allow-hidden-state-mismatch", action="store_true",
                   help="start even when preflight or the load-time check finds a hidden-state mismatch (not recommended)")
    g.add_argument("--draft-tp-size", type=int, default=None, metavar="K",
                   help="run the EAGLE/EAGLE3 drafter at tensor-parallel size K (a divisor of --tp-size; 1 = a "
                        "replicated single-GPU drafter on every rank); enables the opt-in draft_tp feature "
                        "(what ran on a GPU: docs/status.md)")
    g.add_argument("--draft-backend", choices=DRAFT_BACKENDS, default="sglang",
                   help="EAGLE-3 drafter forward: sglang (stock) or triton (our fused norm / SiLU kernels in the "
                        "draft layer; LlamaForCausalLMEagle3 drafters in bf16/fp16); enables the opt-in "
                        "triton_draft feature (what ran on a GPU: docs/status.md)")
    g.add_argument("--draft-backend-fallback", action="store_true",
                   help="with --draft-backend triton: when unsupported, warn and use the sglang backend instead of refusing; "
                        "with --draft-weights fp8 or fp8-weight-only on a GPU without FP8 (compute capability < 8.9), warn and keep the "
                        "triton backend with bf16 drafter weights")
    g.add_argument("--draft-weights", choices=DRAFT_WEIGHTS, default="bf16",
                   help="with --draft-backend triton: bf16 (default: the drafter's weights as loaded), fp8 or "
                        "fp8-weight-only: its "
                        "qkv/o/gate_up/down, fc and lm_head weights quantised once at load to FP8 e4m3 with one "
                        "scale per output channel, used by our Triton GEMM for draft batches of up to 64 rows "
                        "(bs x topk); larger batches keep SGLang's bf16 GEMM (the bf16 weights stay loaded). Needs "
                        "a GPU of compute capability >= 8.9 and an unquantised drafter (--speculative-draft-model-quantization "
                        "unset or unquant; with --quantization, add --speculative-draft-model-quantization unquant). "
                        "fp8 also quantises the activations per token for gate_up at 2..64 rows (native fp8 MMA; the "
                        "lm_head keeps bf16 inputs, which hold acceptance), fp8-weight-only keeps bf16 activations in "
                        "every module (the A/B baseline). "
                        "Measured: docs/status.md")
    g.add_argument("--simulate-acceptance", metavar="RATES", default=None,
                   help="BENCHMARK ONLY, not real serving: replace every verify result by accept lengths drawn per "
                        "request from conditional per-position rates (position k accepted given 0..k-1 were), "
                        "e.g. 0.8,0.7,0.6; at most --speculative-num-steps rates, missing positions are 0; "
                        "EAGLE/EAGLE3 with topk 1 only. Reported in the log (WARNING), /server_info, every "
                        "timing record (simulated: true) and the Prometheus label simulated=\"true\"")
    g.add_argument("--simulate-acceptance-from", metavar="LOG", default=None,
                   help="BENCHMARK ONLY: as --simulate-acceptance with the conditional per-position rates "
                        "measured in a real --timing-log (cut to the server's steps)")


OVERLAY_DESTS = ("patches", "print_patches", "fixture", "timing_log", "timing_log_max_mb", "timing_all_ranks",
                 "timing_summary_interval", "skip_preflight", "allow_hidden_state_mismatch", "draft_tp_size",
                 "draft_backend", "draft_backend_fallback", "draft_weights", "simulate_acceptance", "simulate_acceptance_from",
                 "accept_collapse_window", "accept_collapse_threshold", "on_accept_collapse")


def split_overlay_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """Parse the overlay's flags out of argv; return (overlay namespace, SGLang argv)."""
    parser = OneLineParser(prog="python -m sglang_patches.launch", add_help=False, allow_abbrev=False)
    add_overlay_args(parser)
    ns, rest = parser.parse_known_args(argv)
    refuse_overlay_typo(parser, rest)
    return ns, rest


def refuse_overlay_typo(parser: argparse.ArgumentParser, rest: list[str]) -> None:
    """A flag bound for SGLang that SGLang does not have and that is one letter or two off an overlay
    flag (`--draft-backnd`) is a typo: said before anything starts. SGLang's parser (torch) is read
    only when such a near miss is there."""
    import difflib

    near = {}
    for arg in rest:
        flag = arg.split("=", 1)[0]
        match = flag.startswith("--") and difflib.get_close_matches(flag, parser._option_string_actions, 1, 0.85)
        if match:
            near[flag] = match[0]
    if not near:
        return
    known = sglang_flag_names()
    for flag, match in near.items():
        if not any(o.startswith(flag) for o in known):  # SGLang's, or its abbreviation
            raise UserError(f"launch: {flag} is neither an SGLang flag nor the overlay's; did you mean {match}? "
                            "(see `python -m sglang_patches.launch --help`)")


def sglang_flag_names() -> set[str]:
    """The installed SGLang's server flags (imports its server_args, so torch); empty when SGLang cannot
    be read, so that a near miss alone decides (SGLang's absence is said elsewhere)."""
    try:
        return set(sglang_parser()._option_string_actions)
    except Exception:  # noqa: BLE001 - no readable SGLang
        return set()


def overlay_config(ns: argparse.Namespace) -> OverlayConfig:
    patches = parse_patch_list(ns.patches)
    window, threshold = getattr(ns, "accept_collapse_window", 256), getattr(ns, "accept_collapse_threshold", None)
    if window < 1:
        raise UserError(f"--accept-collapse-window {window}: give at least 1 decode cycle (default 256)")
    if threshold is not None and not threshold > 1:
        raise UserError(f"--accept-collapse-threshold {threshold:g}: give a number > 1 (accept length counts the "
                        "bonus token, so 1 means nothing accepted; default 1.1)")
    # --draft-backend triton and the triton_draft feature are the same switch
    backend = "triton" if getattr(ns, "draft_backend", None) == "triton" or "triton_draft" in patches else "sglang"
    if backend == "triton" and "triton_draft" not in patches:
        patches = patches + ("triton_draft",)
    for name in ("timing_log", "timing_log_max_mb", "timing_summary_interval", "draft_tp_size",
                 "accept_collapse_window", "accept_collapse_threshold", "on_accept_collapse"):
        problem = field_problem(name, getattr(ns, name, None))
        if problem:
            raise UserError(f"--{name.replace('_', '-')} {problem}")
    if "draft_tp" in patches and getattr(ns, "draft_tp_size", None) is None:
        raise UserError(DRAFT_TP_WITHOUT_SIZE.format(where="--patches draft_tp"))
    weights = getattr(ns, "draft_weights", "bf16")
    if is_fp8(weights) and backend != "triton":
        raise UserError(FP8_WITHOUT_TRITON.format(where=f"--draft-weights {weights}"))
    if getattr(ns, "draft_backend_fallback", False) and backend != "triton":  # it would change nothing, unsaid
        raise UserError("--draft-backend-fallback only applies with --draft-backend triton (it says what to do when "
                        "the triton backend cannot run); add --draft-backend triton or drop it")
    return OverlayConfig(
        patches=patches, draft_backend=backend,
        draft_backend_fallback=bool(getattr(ns, "draft_backend_fallback", False)), draft_weights=weights,
        timing_log=ns.timing_log, timing_log_max_mb=ns.timing_log_max_mb,
        timing_all_ranks=ns.timing_all_ranks, timing_summary_interval=ns.timing_summary_interval,
        allow_hidden_state_mismatch=ns.allow_hidden_state_mismatch,
        draft_tp_size=getattr(ns, "draft_tp_size", None),
        accept_collapse_window=getattr(ns, "accept_collapse_window", 256),
        accept_collapse_threshold=getattr(ns, "accept_collapse_threshold", None),
        on_accept_collapse=getattr(ns, "on_accept_collapse", "warn"))


def with_flag_features(config: OverlayConfig, ns: argparse.Namespace, given: list[str]) -> OverlayConfig:
    """The launcher's features with those its flags bring, chosen once, so that --print-patches lists
    what is installed: --draft-backend triton -> triton_draft (overlay_config, which also sets the
    backend), --speculative-adaptive -> adaptive_graphs (with all only: with_adaptive_graphs),
    --draft-tp-size -> draft_tp (whatever --patches says: K alone asks for it). `given`: SGLang's
    flags, a --config file's included."""
    config = with_adaptive_graphs(config, ns.patches, given)
    if getattr(ns, "draft_tp_size", None) is not None and "draft_tp" not in config.patches:
        config = dataclasses.replace(config, patches=config.patches + ("draft_tp",))
    return config


def with_adaptive_graphs(config: OverlayConfig, patches_text: str, given: list[str]) -> OverlayConfig:
    """adaptive_graphs_rule on SGLang's flags `given` (a --config file's included): the launcher, and
    the plugin in SGLang's server CLI on that process's own flags."""
    return adaptive_graphs_rule(config, patches_text, "--speculative-adaptive" in given)


def adaptive_graphs_rule(config: OverlayConfig, patches_text: str, adaptive: bool) -> OverlayConfig:
    """`all` under SGLang's --speculative-adaptive (`adaptive` True) includes the adaptive_graphs
    feature unless `-adaptive_graphs` follows; an explicit list is taken as written. On 0.5.17 it gives
    every candidate's draft-extend its own CUDA graphs, which removed the swapped-in state's verify and
    cycle cost on the H200 (benchmarks/results/2026-12-03-adaptive-graphs); where a version needs no
    fix it installs nothing. `patches_text`: the features as --patches spells them (all, none, a comma
    list, -name). The one rule for every path that can see SGLang's setting before the schedulers
    start: the launcher, the plugin in SGLang's server CLI, sglang_patches.Engine."""
    if not adaptive or "adaptive_graphs" in config.patches:
        return config
    if "adaptive_graphs" not in parse_patch_list(patches_text, all_also=("adaptive_graphs",)):
        return config
    return dataclasses.replace(config, patches=config.patches + ("adaptive_graphs",))


def refuse_sglang_settings(features, argv: list[str], environ=None) -> None:
    """One-line UserError (exit 2) for a setting of the installed SGLang that one of `features` cannot
    follow yet (the compat file's REFUSED: e.g. --pp-size > 1 with timing on 0.5.23), before anything
    starts. `argv`: SGLang's flags as given, a `--config FILE` in them read as SGLang reads it (a
    --pp-size that is not an integer is left to SGLang's parser, which refuses it)."""
    from types import SimpleNamespace

    from sglang_patches import compat

    pp = flag_value(with_sglang_config(argv, store_true=EveryKeyStoreTrue()), *compat.PP_FLAGS)
    refuse_server_args(features, SimpleNamespace(pp_size=int(pp) if pp is not None and pp.strip().isdigit() else None),
                       environ)


def refuse_server_args(features, server_args, environ=None) -> None:
    """refuse_sglang_settings on SGLang's parsed ServerArgs (what an Engine's keyword arguments, a
    prebuilt server_args or any spelling SGLang's parser accepts became): the same one-line UserError."""
    import os

    from sglang_patches import compat
    from sglang_patches.server.hooks import installed_sglang_version

    pp = getattr(server_args, "pp_size", None)
    why = compat.setting_refusal(installed_sglang_version(), features,
                                 pp_size=pp if isinstance(pp, int) else None,
                                 environ=os.environ if environ is None else environ)
    if why:
        raise UserError(why)


def with_sglang_config(argv: list[str], store_true=None) -> list[str]:
    """argv with a `--config FILE` replaced by the flags the file stands for, as SGLang's
    prepare_server_args does (ConfigArgumentMerger, 0.5.17 and 0.5.23 alike): only the exact token
    `--config` followed by a path is expanded (SGLang's parser takes `--config=FILE` and ignores it);
    each top-level key of the YAML mapping becomes `--key value` (spelled as written: `pp-size: 2` is
    --pp-size 2; `pp_size` is a flag SGLang's parser refuses), lists become `--key a b`, and the file's
    flags go first, so a flag on the command line wins (argparse keeps the last value). A file SGLang
    could not read either is refused here in one line instead of SGLang's traceback. `store_true`: the
    keys of SGLang's store_true flags (read from SGLang's parser when a YAML boolean needs them)."""
    if "--config" not in argv:
        return argv
    where = [i for i, arg in enumerate(argv) if arg == "--config"]
    if len(where) > 1:
        raise UserError("--config is given more than once; SGLang reads one config file: merge them into one")
    i = where[0]
    if i + 1 >= len(argv):
        raise UserError("--config needs a file name (a YAML file of SGLang flags)")
    path = argv[i + 1]
    data = _read_sglang_config(path)
    flags: list[str] = []
    for key, value in data.items():
        if isinstance(value, bool):
            # SGLang's rule: a store_true flag is present (true) or absent (false); any other flag
            # gets `--key true` / `--key false` for its own parser to read
            store_true = _store_true_keys() if store_true is None else store_true
            if key.replace("-", "_") in store_true:
                flags += [f"--{key}"] if value else []
            else:
                flags += [f"--{key}", str(value).lower()]
        elif isinstance(value, list):
            flags += [f"--{key}", *map(str, value)] if value else []
        elif isinstance(value, dict):
            import json

            flags += [f"--{key}", json.dumps(value)]
        else:
            flags += [f"--{key}", str(value)]
    return flags + argv[:i] + argv[i + 2:]


def _store_true_keys() -> set[str]:
    """The YAML keys (dashes as underscores) SGLang's ConfigArgumentMerger treats as store_true: the
    dest and every long spelling of each store_true action of the installed SGLang's parser (0.5.23
    reads both; 0.5.17 reads the dest, and none of its store_true flags has another long spelling).
    Importing SGLang's server_args (torch) happens only here, for a YAML boolean."""
    parser = sglang_parser()
    return {key for a in parser._actions if isinstance(a, argparse._StoreTrueAction)
            for key in {a.dest} | {o[2:].replace("-", "_") for o in a.option_strings if o.startswith("--")}}


# What SGLang's server_args import warns on a machine without a GPU: it imports SGLang's FLA attention
# kernels (for a chunk size), whose utils module warns at import when Triton finds no GPU driver.
# Reading the flags runs no kernel, so the warning says nothing about what the parser is used for.
TRITON_NO_GPU_WARNING = r"Triton is not supported on current platform"


def sglang_parser(**kwargs) -> argparse.ArgumentParser:
    """The installed SGLang's own server parser (imports its server_args, so torch); `kwargs` go to
    the ArgumentParser (prog, usage). Only the Triton no-GPU warning of that import is silenced, and
    only around it."""
    import warnings

    from sglang_patches import compat

    parser = argparse.ArgumentParser(add_help=False, **kwargs)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=TRITON_NO_GPU_WARNING, category=UserWarning)
        add_cli_args = compat.current().SERVER_ARGS.resolve()
    add_cli_args(parser)
    return parser



def _read_sglang_config(path: str) -> dict:
    """The YAML mapping of a --config file, with SGLang's own conditions (a .yaml/.yml file that
    exists and holds a mapping, or nothing); UserError naming what is wrong otherwise."""
    import os

    if os.path.splitext(path)[1].lower() not in (".yaml", ".yml"):
        raise UserError(f"--config {path}: SGLang reads a YAML file (.yaml or .yml); give one")
    try:
        import yaml
    except ImportError:
        raise UserError(f"--config {path}: reading it needs PyYAML (SGLang's dependency); pip install pyyaml") from None
    try:
        with open(path, encoding="utf-8") as fh:
            data = yaml.safe_load(fh)
    except OSError as err:
        raise UserError(f"--config {path}: cannot read it ({err.strerror or err}); give a readable YAML file") from None
    except UnicodeDecodeError:
        raise UserError(f"--config {path}: not a text file; give a YAML file of SGLang flags") from None
    except yaml.YAMLError as err:
        where = getattr(err, "problem_mark", None)
        at = f" at line {where.line + 1}" if where is not None else ""
        raise UserError(f"--config {path}: not valid YAML{at}; fix the file") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UserError(f"--config {path}: holds a {type(data).__name__}, not a mapping of flag: value; "
                        "write one 'flag-name: value' per line")
    for key in data:
        if not isinstance(key, str) or not key:
            raise UserError(f"--config {path}: key {key!r} is not a flag name; write one 'flag-name: value' per line")
    ours = sorted(k for k in data if f"--{k}" in overlay_flag_names())
    if ours:
        raise UserError(f"--config {path}: {', '.join(ours)} {'is a launcher flag' if len(ours) == 1 else 'are launcher flags'}"
                        " (SGLang reads this file, not the overlay); give it on the command line")
    return data


def overlay_flag_names() -> set[str]:
    """Every option string of the launcher's overlay flags (`--fixture`, `--timing-log`, ...)."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    add_overlay_args(parser)
    return {o for a in parser._actions for o in a.option_strings}


class EveryKeyStoreTrue(frozenset):
    """`store_true=` for with_sglang_config where the flags are only read, not handed to SGLang: a YAML
    boolean becomes a bare flag (true) or none (false), which is what every check of a flag's presence
    needs, without importing SGLang's parser (torch) to tell its store_true flags apart."""

    def __contains__(self, key) -> bool:
        return True


def flag_value(argv: list[str], *names: str) -> str | None:
    """The value argparse keeps for a flag (`--flag V` or `--flag=V`) given once or several times
    under any of `names`: the last one; None when absent."""
    found = None
    for i, arg in enumerate(argv):
        for name in names:
            if arg == name and i + 1 < len(argv):
                found = argv[i + 1]
            elif arg.startswith(name + "="):
                found = arg.split("=", 1)[1]
    return found
