"""The launcher's check of an adaptive server's start (SGLang's --speculative-adaptive), on the
ServerArgs SGLang parsed, before the server starts.

SGLang resolves the adaptive settings itself while it parses (speculative_hook.py): it turns adaptive
off, with a warning line, where it cannot run (no EAGLE / EAGLE3, topk > 1, attention DP, ...); it
starts at --speculative-num-steps (absent: the middle candidate) and refuses one that is not a
candidate (a ValueError, which launch.serve prints as one line); it sets draft tokens to steps + 1 and
may turn the decode CUDA graphs off (flags, or settings that need it). So the check reads what it made
of the flags, whatever their spelling. What SGLang lets through and then fails on: on 0.5.17 a start
below the largest candidate with decode CUDA graphs fails after the models load ("shared logits buffer
holds R rows but caller needs ..."; compat ADAPTIVE_BUFFERS_FROM_START), refused here in one line. The
candidates are read by SGLang's own loader (compat LOAD_ADAPTIVE_CONFIG; its built-in table without a
config file).
"""
from __future__ import annotations

from sglang_patches import compat
from sglang_patches.errors import UserError


def candidate_steps(path: str | None) -> list[int]:
    """Every bucket's candidate steps, as SGLang's loader reads the file (None: its built-in table)."""
    _, entries = compat.current().LOAD_ADAPTIVE_CONFIG.resolve()(path)
    return sorted({s for e in entries.values() for s in e["candidate_steps"]})


def start_problem(steps: int, candidates: list[int], path: str | None) -> str | None:
    """Why this SGLang cannot run an adaptive server started at `steps` with decode CUDA graphs, or None."""
    top = max(candidates)
    if not compat.current().ADAPTIVE_BUFFERS_FROM_START or steps >= top:
        return None
    where = f"--speculative-adaptive-config {path}" if path else "SGLang's built-in adaptive table"
    return (f"--speculative-adaptive: the server would start at steps {steps} ({steps + 1} draft tokens), below the "
            f"largest candidate of {where} (steps {top}); this SGLang sizes its CUDA-graph logits buffer from the "
            f"start and fails after loading the models (\"shared logits buffer holds ... rows\"); pass "
            f"--speculative-num-steps {top} (SGLang sets draft tokens to steps + 1)")


def check_parsed(server_args) -> None:
    """start_problem on what SGLang parsed (adaptive still on, its start and draft tokens picked, the
    decode graphs on or off): a UserError, or None."""
    if not getattr(server_args, "speculative_adaptive", False) or not compat.current().ADAPTIVE_BUFFERS_FROM_START:
        return
    decode = getattr(getattr(server_args, "cuda_graph_config", None), "decode", None)
    if decode is None or str(getattr(decode, "backend", "disabled")).lower() == "disabled" or not getattr(decode, "bs", None):
        return
    path = getattr(server_args, "speculative_adaptive_config", None)
    problem = start_problem(server_args.speculative_num_steps, candidate_steps(path), path)
    if problem:
        raise UserError(problem)
