"""The launcher's checks of SGLang's --speculative-adaptive, before anything starts.

SGLang turns adaptive speculation off, with a log line, for an algorithm other than EAGLE / EAGLE3 and
for topk > 1 (speculative/adaptive_spec_params.py adaptive_unsupported_reason): the server then runs
its static steps. The launcher says so first, as a warning. On 0.5.17 a server started below its
largest candidate fails at start after loading the models (compat ADAPTIVE_BUFFERS_FROM_START): that is
refused here, in one line with the flags to pass. The candidates are read by SGLang's own loader
(compat LOAD_ADAPTIVE_CONFIG; its built-in table without --speculative-adaptive-config), so a file
SGLang would refuse is refused here too.
"""
from __future__ import annotations

from sglang_patches import compat
from sglang_patches.errors import UserError
from sglang_patches.launch_args import flag_value

ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN")  # SGLang resolves NEXTN to EAGLE before it checks


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


def check_adaptive(argv: list[str], warnings: list[str]) -> None:
    """Warnings (appended to `warnings`) for the settings under which SGLang turns adaptive off; a
    UserError for a 0.5.17 start below the largest candidate. `argv`: SGLang's flags as given (a
    --config file's included). Reads the flags and the config file only."""
    if "--speculative-adaptive" not in argv:
        return
    algo = flag_value(argv, "--speculative-algorithm")
    if algo is not None and algo.upper() not in ALGORITHMS:
        warnings.append(f"--speculative-adaptive with --speculative-algorithm {algo}: SGLang supports EAGLE / EAGLE3 "
                        "only and turns adaptive off, so the server runs its static steps")
        return
    topk = flag_value(argv, "--speculative-eagle-topk")
    if topk is not None and topk.strip() != "1":
        warnings.append(f"--speculative-adaptive with --speculative-eagle-topk {topk}: SGLang adapts at topk 1 only and "
                        "turns adaptive off, so the server runs its static steps; pass --speculative-eagle-topk 1 "
                        "(and --speculative-num-draft-tokens = steps + 1) to adapt")
        return
    path = flag_value(argv, "--speculative-adaptive-config")
    top = max(candidate_steps(path), default=0)
    steps, tokens = flag_value(argv, "--speculative-num-steps"), flag_value(argv, "--speculative-num-draft-tokens")
    if not compat.current().ADAPTIVE_BUFFERS_FROM_START or steps is None or "--disable-cuda-graph" in argv:
        return  # without the steps SGLang picks its own start; without CUDA graphs no shared buffer is sized
    try:
        start = int(tokens) if tokens is not None else int(steps) + 1
    except ValueError:
        return  # SGLang's parser refuses it
    if start < top + 1:
        where = f"--speculative-adaptive-config {path}" if path else "SGLang's built-in adaptive table"
        raise UserError(f"--speculative-adaptive: the server would start at {start} draft tokens, below the largest "
                        f"candidate of {where} (steps {top}); this SGLang sizes its CUDA-graph logits buffer from the "
                        f"start and fails at start (\"shared logits buffer holds ... rows\"); pass "
                        f"--speculative-num-steps {top} --speculative-num-draft-tokens {top + 1}")
