"""A/B runs in one call: the order alternates each repeat (A B, B A, ...) so that a drift of the machine
(clocks, another tenant) falls on both sides alike; each repeat's ratio is paired, and the median ratio
gets a percentile-bootstrap interval, which says whether a difference of 0.5 % can be told from noise."""
from __future__ import annotations

import random
import statistics


def alternating(repeats: int, a, b):
    """(repeat, side) pairs in run order: a, b; b, a; a, b; ... ('side' is `a` or `b` as given)."""
    for rep in range(repeats):
        for side in ((a, b) if rep % 2 == 0 else (b, a)):
            yield rep, side


def bootstrap_ci(stat, *samples: list[float], n: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95 % percentile-bootstrap interval of stat(*samples), each sample resampled on its own."""
    rng = random.Random(seed)
    vals = sorted(stat(*(rng.choices(s, k=len(s)) for s in samples)) for _ in range(n))
    return vals[int(0.025 * n)], vals[int(0.975 * n) - 1]


def median_ratio(num: list[float], den: list[float]) -> float:
    return statistics.median(num) / statistics.median(den)


def paired(a: list[float], b: list[float]) -> dict:
    """Repeat-by-repeat a/b: the ratios, their median and its 95 % bootstrap interval."""
    if not a or len(a) != len(b):
        raise ValueError(f"paired runs need as many A as B values, at least one (got {len(a)} and {len(b)})")
    ratios = [x / y for x, y in zip(a, b)]
    lo, hi = bootstrap_ci(statistics.median, ratios)
    return {"paired_ratios": ratios, "paired_ratio_median": statistics.median(ratios), "paired_ratio_ci95": [lo, hi]}
