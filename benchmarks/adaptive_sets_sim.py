"""The set replay of `advise --adaptive-config` against ground truth on synthetic text (CPU, no server).

A text is a sequence of positions, each with the probability that the drafter's token there is accepted:
spans of random length (exponential, mean EASY / DEAD tokens) alternate between an easy rate and a dead
one. A server runs over it for real: each cycle drafts `s` tokens (s = what SGLang's own AdaptiveStepSlot
holds then), accepts them position by position until one is rejected, and starts the next cycle where
this one ended; a steps-s cycle costs 5.9 + D x (s - 1) ms (one drafter forward of D ms per step after
the first, the advisor's model). That is the truth for every single chain, pair and triple of steps 1-5.

advise sees only what a steps-5 server would log of the same text (accepted drafts per cycle) and picks a
pair or none (offline/adaptive_sets.best_pair, without the advisor's own best chain as a floor). Per text
this reports the pair's predicted and true gain over the truly best fixed chain (on the same text, and on a
held-out text of the same kind the pick never saw), and how much the truly best triple adds over the truly
best pair (whether searching triples would pay). The truth's cycle costs are the advisor's model itself
(5.9 + D x (s - 1) ms, the periods advise is given), so a pick "pays" under that cost model; the
acceptance side, and SGLang's slot, are independent of advise.

    python benchmarks/adaptive_sets_sim.py --out summary.json      # about 1 minute on one core
"""
from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

HYST_1 = {"up_hysteresis": 0.0, "down_hysteresis": -0.25}  # SGLang's bucket-1 keys
GRID = {"easy_len": [20, 80, 300], "dead_len": [10, 60, 250], "easy": [0.75, 0.92], "dead": [0.05, 0.35],
        "draft_ms": [0.15, 0.5]}


def text(n: int, easy_len: int, dead_len: int, easy: float, dead: float, seed: int) -> list[float]:
    rng, out, b = random.Random(seed), [], 0
    while len(out) < n:
        out += [easy if b % 2 else dead] * max(1, int(rng.expovariate(1 / (easy_len if b % 2 else dead_len))))
        b += 1
    return out[:n]


def run(probs: list[float], cands, draft_ms: float, seed: int = 2) -> tuple[float, list[list[int]]]:
    """(tok/s, accepted drafts per cycle) of a server with these candidates over the text, started at the
    largest, SGLang's real AdaptiveStepSlot deciding."""
    from sglang.srt.speculative.adaptive_spec_params import AdaptiveStepSlot

    rng = random.Random(seed)
    slot = AdaptiveStepSlot(initial_steps=max(cands), cfg={"candidate_steps": list(cands), **HYST_1})
    pos = tokens = 0
    ms, log = 0.0, []
    while pos < len(probs):
        s = slot.current_steps
        a = 0
        while a < s and pos + a < len(probs) and rng.random() < probs[pos + a]:
            a += 1
        pos, tokens, ms = pos + a + 1, tokens + a + 1, ms + 5.9 + draft_ms * (s - 1)
        log.append([a])
        slot.update([a])
    return tokens * 1000.0 / ms, log


def one_text(easy_len, dead_len, easy, dead, draft_ms, n=20000) -> dict:
    from sglang_patches.offline.adaptive_sets import best_pair

    probs = text(n, easy_len, dead_len, easy, dead, seed=easy_len * 1000 + dead_len)
    periods = {s: {1: 5.9 + draft_ms * (s - 1)} for s in range(1, 6)}
    pair = best_pair({"steps": 5, "accepted": run(probs, [5], draft_ms, seed=1)[1]}, HYST_1, periods, [1, 2, 3, 4, 5])
    sets = {c: run(probs, c, draft_ms)[0] for k in (1, 2, 3) for c in itertools.combinations(range(1, 6), k)}
    # held out: another text of the same kind, which the pick never saw
    other = text(n, easy_len, dead_len, easy, dead, seed=easy_len * 1000 + dead_len + 7)
    best = {k: max((c for c in sets if len(c) == k), key=sets.get) for k in (1, 2, 3)}
    row = {"easy_len": easy_len, "dead_len": dead_len, "easy": easy, "dead": dead, "draft_ms": draft_ms,
           "best_fixed": best[1][0], "best_fixed_tok_s": round(sets[best[1]], 1),
           "best_pair": list(best[2]), "best_pair_over_fixed": round(sets[best[2]] / sets[best[1]] - 1, 4),
           "best_triple": list(best[3]), "best_triple_over_pair": round(sets[best[3]] / sets[best[2]] - 1, 4),
           "picked": None}
    if pair is not None:
        c = tuple(pair["candidate_steps"])
        fixed_other = max(run(other, (s,), draft_ms)[0] for s in range(1, 6))
        row.update(picked=list(c), predicted_gain=round(pair["tok_s"] / pair["single"][1] - 1, 4),
                   true_gain=round(sets[c] / sets[best[1]] - 1, 4),
                   true_gain_held_out=round(run(other, c, draft_ms)[0] / fixed_other - 1, 4))
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="write the rows and the summary as JSON here (refused if it exists)")
    import figure_cli  # benchmarks/, beside this script
    figure_cli.declare(ap, figure='the candidate-set replay rows (adaptive-sets-sim)', folder='2026-12-05-adaptive-sets-sim',
                       duration='about 1 min, CPU only (no GPU)')
    args = ap.parse_args(argv)
    if args.dry_run:
        return figure_cli.dry_run(out=args.out or "stdout", cases=["72 synthetic texts; every chain, pair and triple of steps 1-5 on SGLang's own AdaptiveStepSlot"])
    if args.out and Path(args.out).exists():
        print(f"--out {args.out}: already exists; give a new file", file=sys.stderr)
        return 2
    if args.out and not Path(args.out).resolve().parent.is_dir():
        print(f"--out {args.out}: folder {Path(args.out).parent} does not exist; create it first", file=sys.stderr)
        return 2
    rows = [one_text(*v) for v in itertools.product(*GRID.values())]
    picked = [r for r in rows if r["picked"]]
    summary = {"texts": len(rows), "pairs_picked": len(picked),
               "picked_pairs_that_lose_to_the_best_fixed_chain": sum(r["true_gain"] < 0 for r in picked),
               "true_gain_of_picked_min": min((r["true_gain"] for r in picked), default=None),
               "true_gain_of_picked_max": max((r["true_gain"] for r in picked), default=None),
               "predicted_minus_true_max_abs": max((abs(r["predicted_gain"] - r["true_gain"]) for r in picked), default=None),
               "predicted_minus_true_mean": (round(sum(r["predicted_gain"] - r["true_gain"] for r in picked) / len(picked), 4)
                                             if picked else None),
               "picked_with_true_gain_under_3pct": sum(r["true_gain"] < 0.03 for r in picked),
               "held_out_true_gain_min": min((r["true_gain_held_out"] for r in picked), default=None),
               "held_out_picks_that_lose": sum(r["true_gain_held_out"] < 0 for r in picked),
               "texts_where_some_pair_pays_over_3pct_but_none_picked":
                   sum(r["best_pair_over_fixed"] > 0.03 and not r["picked"] for r in rows),
               "best_triple_over_best_pair_max": max(r["best_triple_over_pair"] for r in rows),
               "grid": GRID, "rows": rows}
    if args.out:
        Path(args.out).write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k not in ("rows", "grid")}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
