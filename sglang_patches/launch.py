"""Drop-in SGLang server with the overlay: `python -m sglang_patches.launch <sglang flags> [overlay flags]`.

Same HTTP server and OpenAI-compatible API as `python -m sglang.launch_server`; in addition every
scheduler process is patched (see `sglang-patches patches`), preflight refuses hidden-state
mismatches before anything is spawned, and `GET /spec_timing` / `POST /spec_timing/reset` exist.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys

from sglang_patches.cliargs import check_dir_creatable, refuse_output_on_input, same_path
from sglang_patches.errors import UserError, exit_with
from sglang_patches.launch_adaptive import check_parsed
from sglang_patches.launch_args import (add_overlay_args, overlay_config, refuse_server_args, refuse_sglang_settings,
                                        split_overlay_args, with_flag_features, with_sglang_config, EveryKeyStoreTrue,
                                        GROUP_TITLE, sglang_parser)
from sglang_patches.launch_args import flag_value as _flag_value
from sglang_patches.vocab.overlay_config import ENV_VAR, SERVER_PID_ENV, is_fp8

PROG = "python -m sglang_patches.launch"


def print_help() -> None:
    from sglang_patches.versions import support_line

    # the overlay's few flags first, SGLang's ~500 after them (argparse would print them in one list).
    # The overlay's part is printed and flushed before SGLang's server_args is imported (torch and
    # SGLang's kernels: seconds), so it shows at once.
    overlay = argparse.ArgumentParser(
        prog=PROG, usage=f"{PROG} [SGLang's flags] [the overlay's flags]",
        description=__doc__.split("\n\n")[0] + " Every sglang.launch_server flag is accepted; the overlay's own "
        "flags come first, under '" + GROUP_TITLE + "', SGLang's after them. " + support_line() + ".")
    add_overlay_args(overlay)
    overlay.print_help()
    print("\nSGLang's flags (passed through unchanged):", flush=True)
    sglang_parser(prog=PROG, usage=argparse.SUPPRESS).print_help()


def apply_fixture(name: str, argv: list[str]) -> list[str]:
    """The model flags a fixture fills (built into the cache on first use, rebuilt when incomplete
    or stale) unless given in argv. Call it after every check that can run without it."""
    from sglang_patches.offline.fixtures import ensure_fixture
    from sglang_patches.offline.fixtures.model_flags import fixture_flags

    ensure_fixture(name)
    extra = fixture_flags(name, argv)
    print(f"sglang-patches: fixture {name}: {' '.join(extra)}", file=sys.stderr)
    return extra


def drafter_architectures(fixture: str | None, argv: list[str]) -> tuple[list[str], str] | None:
    """The drafter's architectures and where they were read: the drafter path's config.json when it is a
    local directory, else a fixture's drafter (from its spec: nothing is built). None when unknown (a hub
    id: the in-server model check decides)."""
    import json

    path = _flag_value(argv, "--speculative-draft-model-path", "--speculative-draft-model")
    if path and os.path.isdir(path):
        try:
            with open(os.path.join(path, "config.json"), encoding="utf-8") as fh:
                archs = json.load(fh).get("architectures")
        except (OSError, ValueError, RecursionError, AttributeError):
            return None  # unreadable: the later checks (launch_check.problem, preflight) say so
        ok = isinstance(archs, list) and all(isinstance(a, str) for a in archs)
        return (archs, f"the drafter {path}") if ok else None
    if fixture and not path:
        from sglang_patches.offline.fixtures.specs import get_spec

        return list(get_spec(fixture).draft["architectures"]), f"fixture {fixture}'s drafter"
    return None


def refuse_draft_head(ns, rest: list[str]) -> None:
    """A drafter the Llama-only draft features cannot serve (SGLang's MLA head), refused in one line
    before anything else is checked or built. Under --draft-backend-fallback with the triton backend,
    launch_check.resolve falls back to the stock backend (bf16 drafter weights) instead, after a warning."""
    backend, weights = getattr(ns, "draft_backend", None) or "sglang", getattr(ns, "draft_weights", "bf16")
    if not (backend == "triton" or is_fp8(weights)):
        return
    if backend == "triton" and getattr(ns, "draft_backend_fallback", False):
        return
    found = drafter_architectures(ns.fixture, with_sglang_config(rest, store_true=EveryKeyStoreTrue()))
    if found is None:
        return
    from sglang_patches.server.draft_backend.launch_check import head_problem

    reason = head_problem(found[0], found[1], backend=backend, weights=weights)
    if reason:
        raise UserError(reason)


def preflight_or_die(argv: list[str], allow: bool) -> None:
    """Run preflight on the serve command's pair (local directories or hub ids in the local Hugging
    Face cache, as `sglang-patches preflight` does); a pair it cannot read from here is named in one
    line and the in-server load-time check is left to catch it. argv: the flags with a --config
    file expanded (with_sglang_config)."""
    algo = _flag_value(argv, "--speculative-algorithm")
    if not algo:
        return  # no speculation: no pair to check
    target = _flag_value(argv, "--model-path", "--model")
    draft = _flag_value(argv, "--speculative-draft-model-path", "--speculative-draft-model")
    if not (target and draft):
        if algo.upper() not in ("EAGLE", "EAGLE3"):
            return  # NGRAM, NEXTN and the like need no separate drafter checkpoint
        print(f"sglang-patches: warning: preflight not run: no {'--model-path' if not target else '--speculative-draft-model-path'}"
              " (the in-server load-time check still runs)", file=sys.stderr)
        return
    from sglang_patches.offline.preflight import run_preflight
    from sglang_patches.offline.preflight.hub_cache import NotCached

    def _int(name):
        value = _flag_value(argv, name)
        return int(value) if value is not None else None  # check_int_flags() has vetted it

    try:
        result = run_preflight(target, draft, algo, steps=_int("--speculative-num-steps"),
                               topk=_int("--speculative-eagle-topk"), draft_tokens=_int("--speculative-num-draft-tokens"),
                               revision=_flag_value(argv, "--revision"),
                               draft_revision=_flag_value(argv, "--speculative-draft-model-revision"),
                               load_format=_flag_value(argv, "--load-format"),
                               draft_load_format=_flag_value(argv, "--speculative-draft-load-format"),
                               quantization=_flag_value(argv, "--quantization"),
                               draft_quantization=_flag_value(argv, "--speculative-draft-model-quantization"))
    except NotCached as err:  # SGLang downloads it at start; nothing here to read yet
        print(f"sglang-patches: warning: preflight not run: {err} (the in-server load-time check still runs)",
              file=sys.stderr)
        return
    if result.ok:
        for f in result.warnings:  # the ones that mean speculation cannot pay: no acceptance, a whole model
            if f.code in ("SP010", "SP011", "SP012"):
                print(f"sglang-patches: warning: preflight {f.code}: {f.message}", file=sys.stderr)
        return
    print(result.format_text(), file=sys.stderr)
    if allow:
        print("sglang-patches: starting anyway (--allow-hidden-state-mismatch)", file=sys.stderr)
        return
    raise UserError("preflight found problems (above); fix them or pass --allow-hidden-state-mismatch", code=1)


def first_use_note(argv: list[str]) -> list[str]:
    """['note: ...'] when the target's first forward compiles a kernel SGLang has not cached (offline/first_use.py)."""
    from sglang_patches import compat
    from sglang_patches.offline import first_use
    from sglang_patches.offline.preflight.hub_cache import resolve_model

    target = _flag_value(argv, "--model-path", "--model")
    if _flag_value(argv, "--moe-runner-backend") not in (None, "auto"):
        return []  # another MoE runner than SGLang's default, which picks the Marlin kernel for WNA16
    try:
        path = resolve_model(target, "target", _flag_value(argv, "--revision"))[0] if target else None
    except UserError:  # not here to read: SGLang downloads it, and says what it compiles itself
        return []
    line = first_use.note(path, getattr(compat.current(), "JIT_CACHE", None))
    return [f"note: {line}"] if line else []


# SGLang integer flags the overlay reads itself (preflight, draft TP): a bad value is named here in one
# line, before anything is spawned, instead of failing inside our checks or SGLang's parser.
INT_FLAGS = {"--speculative-num-steps": 1, "--speculative-eagle-topk": 1, "--speculative-num-draft-tokens": 1,
             "--tp-size": 1, "--tensor-parallel-size": 1, "--tp": 1, "--pp-size": 1,
             "--pipeline-parallel-size": 1, "--dp-size": 1, "--data-parallel-size": 1, "--port": 1}


def check_int_flags(argv: list[str]) -> None:
    for i, arg in enumerate(argv):
        flag, eq, value = arg.partition("=")
        if flag not in INT_FLAGS:
            continue
        if not eq:
            value = argv[i + 1] if i + 1 < len(argv) else None
        if value is None:
            raise UserError(f"{flag} needs a value (an integer >= {INT_FLAGS[flag]})")
        try:
            number = int(value)
        except ValueError:
            number = None
        if number is None or number < INT_FLAGS[flag] or (flag == "--port" and number > 65535):
            limit = "from 1 to 65535" if flag == "--port" else f">= {INT_FLAGS[flag]}"
            raise UserError(f"{flag} {value!r}: expected an integer {limit}")


def check_timing_log(path: str | None, argv: list[str], inputs=()) -> str | None:
    """--timing-log must be a writable file in an existing directory, outside the model directories
    and not one of the overlay's input files (the sink appends to it; rotation writes PATH.1 ...).
    Returns a note to print once every check has passed when the file exists: it is continued."""
    if path is None:
        return None
    refuse_output_on_input(path, "--timing-log", inputs)
    if os.path.isdir(path):
        raise UserError(f"--timing-log {path}: is a directory; give a file name such as {os.path.join(path, 'cycles.jsonl')}")
    check_dir_creatable(os.path.dirname(os.path.abspath(path)), "--timing-log", must_exist=True)
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise UserError(f"--timing-log {path}: not writable (permission denied); choose another path")
    real = os.path.realpath(path)
    for flag in ("--model-path", "--speculative-draft-model-path"):
        model = _flag_value(argv, flag, flag.replace("-path", ""))
        if model and os.path.isdir(model) and (same_path(path, model) or
                                               real.startswith(os.path.realpath(model) + os.sep)):
            raise UserError(f"--timing-log {path} is inside {flag} {model}; write the log outside the model "
                            "directory (an input is never written to)")
    if os.path.isfile(path) and os.path.getsize(path) > 0:  # a restart continues its log; said, not silent
        return (f"--timing-log {path} exists ({os.path.getsize(path) / 2**20:.1f} MB); new cycles are appended "
                "(advise asks for --config when a log mixes configurations; give a new path to keep runs apart)")
    return None


def check_gpu(argv: list[str]) -> None:
    """One line instead of SGLang's traceback when the server would need a CUDA GPU and none is visible."""
    device = (_flag_value(argv, "--device") or "cuda").lower()
    if device not in ("cuda", "auto"):
        return
    try:
        import torch
        ok = torch.cuda.is_available()
    except Exception:  # noqa: BLE001 - torch missing or its CUDA build broken: no usable GPU either way
        ok = False
    if not ok:
        raise UserError("no CUDA GPU is visible (torch.cuda.is_available() is False); run on a GPU machine, "
                        "check CUDA_VISIBLE_DEVICES and the driver, or pass SGLang's --device for another backend")


def check_draft_tp(k: int | None, argv: list[str], *, need_algorithm: bool) -> None:
    """Refuse a --draft-tp-size that cannot work, before anything is spawned (one-line UserError)."""
    if k is None:
        return
    from sglang_patches.server.draft_tp.layout import size_error, validation_error

    tp_text = _flag_value(argv, "--tp-size", "--tensor-parallel-size", "--tp")
    try:
        tp = int(tp_text) if tp_text is not None else 1
    except ValueError:
        raise UserError(f"--tp-size {tp_text!r} is not an integer") from None
    pp_text = _flag_value(argv, "--pp-size", "--pipeline-parallel-size")
    pp = int(pp_text) if pp_text and pp_text.isdigit() else 1
    dp_attention = "--enable-dp-attention" in argv
    err = size_error(k, tp)
    if not err and dp_attention and k > 1:
        err = validation_error(k, tp, "EAGLE3", dp_attention=True)
    if not err and need_algorithm:
        err = validation_error(k, tp, _flag_value(argv, "--speculative-algorithm"), dp_attention, pp)
    if not err and need_algorithm:
        from sglang_patches.server.draft_tp import refusal_for
        from sglang_patches.server.hooks import installed_sglang_version

        err = refusal_for(installed_sglang_version())
    if err:
        raise UserError(err)


def simulated_acceptance(ns, argv: list[str], config):
    """Resolve --simulate-acceptance[-from] against the server's flags (UserError before any spawn) and
    say loudly that what follows is a simulation."""
    from sglang_patches.server.simulate.checks import resolve
    from sglang_patches.vocab.rates import accept_length

    got = resolve(getattr(ns, "simulate_acceptance", None), getattr(ns, "simulate_acceptance_from", None),
                  algorithm=_flag_value(argv, "--speculative-algorithm"),
                  steps=_flag_value(argv, "--speculative-num-steps"),
                  topk=_flag_value(argv, "--speculative-eagle-topk"))
    if got is None:
        return config
    rates, info = got
    if "marker" not in config.patches:
        raise UserError("--simulate-acceptance needs the marker feature (it reports the simulation in "
                        "/server_info); keep marker in --patches")
    print(f"sglang-patches: WARNING: SIMULATED ACCEPTANCE (benchmark only, not real serving): verify results "
          f"are replaced by accept lengths drawn from conditional per-position rates {rates} "
          f"(from {info['source']}; expected accept length {accept_length(rates):.3f})", file=sys.stderr)
    return dataclasses.replace(config, simulate_acceptance=rates)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if "-h" in argv or "--help" in argv:
            print_help()
            return 0
        ns, rest = split_overlay_args(argv)
        refuse_draft_head(ns, rest)  # before the flag rules: an MLA head's fix is not "add --draft-backend triton"
        config = overlay_config(ns)
        # every check reads the flags SGLang will parse, a --config file's included (rest itself
        # goes to SGLang as written; SGLang expands the file again)
        given = with_sglang_config(rest, store_true=EveryKeyStoreTrue())
        check_int_flags(given)
        config = with_flag_features(config, ns, given)  # once: --print-patches lists what is installed
        log_note = check_timing_log(config.timing_log, given,
                                    [("--simulate-acceptance-from", getattr(ns, "simulate_acceptance_from", None))])
        check_draft_tp(ns.draft_tp_size, given, need_algorithm=False)  # cheap checks before building a fixture
        # every check that needs no fixture files runs on the flags the fixture will add, GPU included,
        # before its cache is built or repaired: a refused run changes nothing
        if ns.fixture:
            from sglang_patches.offline.fixtures.model_flags import fixture_flags

            planned = given + fixture_flags(ns.fixture, given)
        else:
            planned = given
        if ns.print_patches:  # what would be installed, after the checks of the features and the fixture name
            from sglang_patches.server.patches.catalog import cli_main

            refuse_sglang_settings(config.patches, planned)
            return cli_main(["--patches", ",".join(config.patches) or "none"])
        check_draft_tp(ns.draft_tp_size, planned, need_algorithm=True)
        refuse_sglang_settings(config.patches, planned)  # what this SGLang does that a feature cannot follow
        held: list[str] = []  # warnings printed only once every check below has passed
        if is_fp8(config.draft_weights):  # flags and GPUs that cannot take FP8 drafter weights
            from sglang_patches.server.draft_backend.launch_check import check_weights

            config = check_weights(config, planned, fallback=ns.draft_backend_fallback, warnings=held)
        config = simulated_acceptance(ns, planned, config)
        from sglang_patches.server.hooks import installed_sglang_version
        from sglang_patches.versions import check_sglang_version

        warning = check_sglang_version(installed_sglang_version())
        if ns.fixture:
            check_gpu(planned)
            extra = apply_fixture(ns.fixture, given)
            rest, given = rest + extra, given + extra
        if config.draft_backend == "triton":
            from sglang_patches.server.draft_backend.launch_check import resolve

            config = resolve(config, given, fallback=ns.draft_backend_fallback)
        if not ns.skip_preflight:
            preflight_or_die(given, ns.allow_hidden_state_mismatch)
        said = [f"warning: {line}" for line in ([warning] if warning else []) + held]
        said += [f"note: {log_note}"] if log_note else []
        said += first_use_note(given)
        os.environ[ENV_VAR] = config.to_env()
        os.environ[SERVER_PID_ENV] = str(os.getpid())  # whom --on-accept-collapse exit signals
    except UserError as err:
        exit_with(err)
    return serve(rest, exit_on_collapse=config.on_accept_collapse == "exit", features=config.patches, said=said)


def serve(sglang_argv: list[str], exit_on_collapse: bool = False, features=(), said=()) -> int:
    """`said`: the launcher's warning and note lines, printed once the last refusal below has passed."""
    try:
        # before SGLang is imported: its own failure is a traceback
        check_gpu(with_sglang_config(sglang_argv, store_true=EveryKeyStoreTrue()))
    except UserError as err:
        exit_with(err)
    from sglang_patches import compat
    from sglang_patches.server import deliberate_stop
    from sglang_patches.server.scheduler_entry import run_scheduler_process
    from sglang_patches.server.timing.endpoint import install_routes

    c = compat.current()
    deliberate_stop.install(c.KILL_PROCESS_TREE.resolve())  # --on-accept-collapse exit: no crash dumps
    c.LOAD_PLUGINS.resolve()()
    try:
        server_args = c.PREPARE_SERVER_ARGS.resolve()(sglang_argv)
    except (ValueError, OSError) as err:  # SGLang's own argument checks (a start that is no adaptive candidate,
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]  # an unreadable config file, ...)
        exit_with(UserError(f"SGLang refuses the arguments: {first}"))
    try:  # the refusals again on what SGLang parsed: a spelling its parser accepts that the argv checks
        refuse_server_args(features, server_args)  # do not read (an abbreviation such as --pp-s 2)
        check_parsed(server_args)
    except UserError as err:
        exit_with(err)
    if server_args.encoder_only or getattr(server_args, "smg_grpc_mode", False) or getattr(server_args, "use_ray", False):
        exit_with(UserError("the drop-in launcher serves the HTTP server only; drop --encoder-only/--grpc-mode/--use-ray"))
    if exit_on_collapse and (getattr(server_args, "tokenizer_worker_num", 1) or 1) > 1:
        # uvicorn's multi-worker supervisor replaces this process's signal handlers with its own
        # queue, which drops SIGUSR1 (and SIGQUIT): the deliberate stop could not reach it
        exit_with(UserError("--on-accept-collapse exit needs one tokenizer worker (uvicorn's multi-worker "
                            "supervisor swallows the stop signal); drop --tokenizer-worker-num or use "
                            "--on-accept-collapse warn"))
    for line in said:  # every refusal has passed: the start goes ahead
        print(f"sglang-patches: {line}", file=sys.stderr)
    install_routes(c.HTTP_APP.resolve())
    # a hidden-state mismatch at model load: one line and exit 4, not SGLang's traceback and tree kill
    with deliberate_stop.mismatch_stop(c.KILL_PROCESS_TREE.resolve()):
        try:
            c.LAUNCH_SERVER.resolve()(server_args, run_scheduler_process_func=run_scheduler_process)
        finally:
            c.KILL_PROCESS_TREE.resolve()(os.getpid(), include_parent=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
