"""The launcher's checks of SGLang's --speculative-adaptive, before anything starts.

SGLang turns adaptive speculation off, with a log line, without an EAGLE / EAGLE3 algorithm and for
topk > 1 (speculative/adaptive_spec_params.py adaptive_unsupported_reason): the server then runs static
steps, which the launcher says first, as a warning. Otherwise SGLang starts at --speculative-num-steps
(absent: the middle of the config's candidates), refuses a start that is not a candidate (a traceback),
and sets draft tokens to steps + 1. On 0.5.17 a start below the largest candidate with decode CUDA graphs
fails after the models load (compat ADAPTIVE_BUFFERS_FROM_START). Both are refused here in one line: on
the flags before anything starts (check_adaptive), and again on the ServerArgs SGLang parsed
(check_parsed: a spelling its parser accepts that the flags check does not read). The candidates are read
by SGLang's own loader (compat LOAD_ADAPTIVE_CONFIG; its built-in table without a config file).
"""
from __future__ import annotations

from sglang_patches import compat
from sglang_patches.errors import UserError
from sglang_patches.launch_args import flag_value

ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN")  # SGLang resolves NEXTN to EAGLE before it checks
GRAPHS_OFF = ("--disable-cuda-graph", "--disable-decode-cuda-graph")


def candidate_steps(path: str | None) -> list[int]:
    """Every bucket's candidate steps, as SGLang's loader reads the file (None: its built-in table)."""
    load = compat.current().LOAD_ADAPTIVE_CONFIG.resolve()
    try:
        _, entries = load(path)
    except OSError as err:
        raise UserError(f"--speculative-adaptive-config {path}: cannot be read ({err.strerror or err}); "
                        "give an existing JSON file, e.g. one `sglang-patches advise LOG --adaptive-config` wrote") from None
    except (ValueError, TypeError, AttributeError) as err:  # json's errors are ValueErrors
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise UserError(f"--speculative-adaptive-config {path}: SGLang's loader refuses it: {first}; "
                        "fix the file (integer-string batch-size keys, each with a candidate_steps list)") from None
    return sorted({s for e in entries.values() for s in e["candidate_steps"]})


def _where(path: str | None) -> str:
    return f"--speculative-adaptive-config {path}" if path else "SGLang's built-in adaptive table"


def start_problem(steps: int, candidates: list[int], path: str | None, picked: bool = False) -> str | None:
    """Why SGLang cannot start an adaptive server at `steps` (`picked`: SGLang's own pick, no flag), or None."""
    top, said = max(candidates), (f"steps {steps} (SGLang's pick without --speculative-num-steps: the middle "
                                  "candidate)" if picked else f"--speculative-num-steps {steps}")
    if steps not in candidates:
        return (f"--speculative-adaptive: {said} is not one of the candidates {candidates} of {_where(path)}; "
                f"SGLang refuses that start; pass --speculative-num-steps {top}")
    if compat.current().ADAPTIVE_BUFFERS_FROM_START and steps < top:
        return (f"--speculative-adaptive: the server would start at {said} ({steps + 1} draft tokens), below the "
                f"largest candidate of {_where(path)} (steps {top}); this SGLang sizes its CUDA-graph logits buffer "
                f"from the start and fails after loading (\"shared logits buffer holds ... rows\"); pass "
                f"--speculative-num-steps {top} (SGLang sets draft tokens to steps + 1)")
    return None


def check_adaptive(argv: list[str], warnings: list[str]) -> None:
    """Warnings (appended to `warnings`) where SGLang turns adaptive off; a UserError for a start SGLang
    refuses or cannot run. `argv`: SGLang's flags (a --config file's included). Reads the flags and the
    config file only."""
    if "--speculative-adaptive" not in argv:
        return
    algo = flag_value(argv, "--speculative-algorithm")
    if algo is None or algo.upper() not in ALGORITHMS:
        warnings.append(f"--speculative-adaptive {'without --speculative-algorithm' if algo is None else 'with --speculative-algorithm ' + algo}"
                        ": SGLang adapts EAGLE / EAGLE3 only and turns adaptive off (nothing adapts)")
        return
    topk = flag_value(argv, "--speculative-eagle-topk")
    if topk is not None and topk.strip().lstrip("0") != "1":
        warnings.append(f"--speculative-adaptive with --speculative-eagle-topk {topk}: SGLang adapts at topk 1 only and "
                        "turns adaptive off, so the server runs its static steps; pass --speculative-eagle-topk 1 to adapt")
        return
    path = flag_value(argv, "--speculative-adaptive-config")
    candidates = candidate_steps(path)
    text = flag_value(argv, "--speculative-num-steps")
    try:
        steps = int(text) if text is not None else candidates[len(candidates) // 2]
    except ValueError:
        return  # SGLang's parser refuses it
    graphs_maybe_off = (any(f in argv for f in GRAPHS_OFF) or flag_value(argv, "--cuda-graph-config") is not None
                        or (flag_value(argv, "--cuda-graph-backend-decode") or "").lower() == "disabled")
    problem = start_problem(steps, candidates, path, picked=text is None)
    if problem and (steps not in candidates or not graphs_maybe_off):  # else check_parsed reads the graphs
        raise UserError(problem)


def check_parsed(server_args) -> None:
    """start_problem on what SGLang parsed (after it picked the start and the draft tokens): a 0.5.17
    adaptive server with decode CUDA graphs started below its largest candidate. UserError or None."""
    if not getattr(server_args, "speculative_adaptive", False) or not compat.current().ADAPTIVE_BUFFERS_FROM_START:
        return
    decode = getattr(getattr(server_args, "cuda_graph_config", None), "decode", None)
    if decode is None or str(getattr(decode, "backend", "disabled")).lower() == "disabled" or not getattr(decode, "bs", None):
        return
    path = getattr(server_args, "speculative_adaptive_config", None)
    problem = start_problem(server_args.speculative_num_steps, candidate_steps(path), path)
    if problem:
        raise UserError(problem)
