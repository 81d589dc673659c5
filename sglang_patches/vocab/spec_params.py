"""SGLang's rules for --speculative-num-steps / --speculative-eagle-topk / --speculative-num-draft-tokens
(SP008): one pure function from the three numbers to findings.

Two callers, one set of messages and fixes: preflight (`offline/preflight/rules.py`, on the flags of a
serve command) and the what-if grid (`whatif/grid.py`, which skips the combinations SGLang refuses or
crashes on). Sources (SGLang 0.5.17): `speculative_hook._handle_eagle_family` auto-chooses the three only
when all are unset and forces draft tokens = steps + 1 at topk 1; `eagle_utils.organize_draft_results`
takes `topk(draft_tokens - 1)` over `topk + (steps - 1) * topk**2` candidates.
"""
from __future__ import annotations

from sglang_patches.vocab.findings import ERROR, WARNING, Finding


def sp008_spec_params(inp) -> list[Finding]:
    """`inp` has `steps`, `topk`, `draft_tokens` (int or None: not given)."""
    s, k, n = inp.steps, inp.topk, inp.draft_tokens
    out = []
    if s is None and (k is not None or n is not None):
        return [Finding("SP008", ERROR,
            "--speculative-eagle-topk / --speculative-num-draft-tokens given without --speculative-num-steps; "
            "SGLang auto-chooses these only when all three are unset and fails on an assertion otherwise",
            "also pass --speculative-num-steps (or drop all three)")]
    for flag, v in (("--speculative-num-steps", s), ("--speculative-eagle-topk", k),
                    ("--speculative-num-draft-tokens", n)):
        if v is not None and v < 1:
            out.append(Finding("SP008", ERROR, f"{flag} is {v}; it must be at least 1", f"{flag} 1 or more"))
    if out or s is None:
        return out
    if k is None or n is None:
        return [Finding("SP008", ERROR,
            "--speculative-num-steps given without --speculative-eagle-topk and --speculative-num-draft-tokens; "
            "SGLang then skips its auto choice and leaves them unset",
            "pass all three: --speculative-num-steps, --speculative-eagle-topk, --speculative-num-draft-tokens")]
    if k == 1:
        if n != s + 1:
            out.append(Finding("SP008", WARNING,
                f"with topk 1 SGLang overrides --speculative-num-draft-tokens {n} to steps + 1 = {s + 1}",
                f"--speculative-num-draft-tokens {s + 1}"))
        return out
    if n < s + 1:  # seen on the H200 (sweep of the trained pair): s2_k2_n2 and s3_k2_n2 crashed at the first verify
        out.append(Finding("SP008", ERROR,
            f"--speculative-num-draft-tokens {n} < steps + 1 = {s + 1} with topk {k}: SGLang 0.5.17's tree verify "
            f"compacts the accepted path (up to steps + 1 tokens) into a block of draft-token width and crashes "
            f"on the first decode (_compact_accept_to_front: 'expanded size of the tensor ({n}) must match ({s + 1})')",
            f"--speculative-num-draft-tokens {s + 1} or more (or fewer --speculative-num-steps)"))
    candidates = k + (s - 1) * k * k
    if n - 1 > candidates:
        out.append(Finding("SP008", ERROR,
            f"--speculative-num-draft-tokens {n} needs {n - 1} draft tokens but steps {s} x topk {k} yields "
            f"only {candidates} candidates (topk + (steps-1) x topk^2); torch.topk fails in organize_draft_results",
            f"--speculative-num-draft-tokens {candidates + 1} or fewer (or raise --speculative-num-steps)"))
    return out
