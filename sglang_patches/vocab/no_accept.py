"""The verdict when the drafter accepts (almost) nothing: one text for `report`, `advise`, the report
figure, `/spec_timing` and the server's accept-collapse alarm.

At steps >= 2 a cycle drafts `steps` tokens; an accept length (accepted drafts + 1 bonus token)
below COLLAPSE_ACCEPT_LENGTH means fewer than one draft in ten is kept. Each cycle then pays for
the drafter's forwards and a verify over steps + 1 tokens per request and gets back about the one
token that plain decode gives for a single, narrower target forward: no steps / draft-token choice
can beat plain decode, so no chain is "recommended" (a shorter chain only loses less). At steps 1
the accept length is at most 2 and a low one is no such sign.

Stdlib only: the server's alarm imports it.
"""
from __future__ import annotations

import shlex

COLLAPSE_ACCEPT_LENGTH = 1.1  # the alarm's default threshold too

CAUSES = (
    "an EAGLE-3 drafter served with --speculative-algorithm EAGLE (or an EAGLE drafter as EAGLE3): "
    "SGLang then skips the drafter's fc layer without a word",
    "the wrong drafter for this target (trained for another model, tokenizer or chat template), or a drafter "
    "with dummy (random) weights (--load-format dummy / --speculative-draft-load-format dummy)",
    "a quantised target (--quantization, or a pre-quantised checkpoint) with a bf16 drafter trained on the "
    "unquantised target's hidden states (the drafter also inherits --quantization unless "
    "--speculative-draft-model-quantization is set)",
)


def accepts_nothing(accept_length, steps) -> bool:
    """True when a chain of `steps` >= 2 accepted (almost) nothing: accept length < 1.1."""
    return (accept_length is not None and steps is not None and steps >= 2
            and accept_length < COLLAPSE_ACCEPT_LENGTH)


PLACEHOLDERS = {"TARGET": "--model-path", "DRAFT": "--speculative-draft-model-path"}


def preflight_command(target=None, draft=None, algorithm=None, steps=None, topk=None, draft_tokens=None) -> str:
    """The `sglang-patches preflight` line that checks the causes above for this pair, runnable as
    printed when both paths are known. An unknown path is the placeholder TARGET / DRAFT, and
    `check_note` then says what to put there."""
    parts = ["sglang-patches", "preflight", "--model-path", str(target or "TARGET"),
             "--speculative-draft-model-path", str(draft or "DRAFT")]
    for flag, value in (("--speculative-algorithm", algorithm), ("--speculative-num-steps", steps),
                        ("--speculative-eagle-topk", topk), ("--speculative-num-draft-tokens", draft_tokens)):
        if value is not None:
            parts += [flag, str(value)]
    return " ".join(p if p in PLACEHOLDERS else shlex.quote(p) for p in parts)


def check_note(command: str) -> str | None:
    """What the placeholders left in `command` stand for (None when it runs as printed)."""
    words = command.split()
    left = [w for w in PLACEHOLDERS if w in words]
    if not left:
        return None
    names = " and ".join(left)
    flags = " and ".join(PLACEHOLDERS[w] for w in left)
    verb = "stands" if len(left) == 1 else "stand"
    return (f"{names} {verb} for the {flags} the server was started with, not known here; "
            "or paste the whole serve command after `sglang-patches preflight`")


def verdict(accept_length, steps, command: str | None = None) -> dict | None:
    """The structured verdict (None when the drafter does accept): what every answer leads with."""
    if not accepts_nothing(accept_length, steps):
        return None
    command = command or preflight_command()
    return {"drafter_accepts_nothing": True, "accept_length": accept_length, "steps": steps,
            "threshold": COLLAPSE_ACCEPT_LENGTH,
            "summary": (f"the drafter accepts nothing: accept length {accept_length:.2f} at steps {steps} (up to "
                        f"{steps + 1} possible); speculation cannot beat plain decode with this drafter, at any "
                        "steps or draft tokens: serve without speculation until it is fixed"),
            "causes": list(CAUSES), "check": command, "check_note": check_note(command)}


def verdict_lines(v: dict) -> list[str]:
    """Three lines: the verdict, the likely causes, the command that checks them."""
    causes = "; ".join(f"({i}) {c}" for i, c in enumerate(v["causes"], 1))
    check = v["check"] + (f" ({v['check_note']})" if v.get("check_note") else "")
    return [v["summary"], f"likely causes: {causes}", f"check them: {check}"]
