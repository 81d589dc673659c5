"""The notes `report` prints under its table: what the shares mean and what they leave out (slow
cycles, idle waits between cycles), each for the first rank that had any."""
from __future__ import annotations

from sglang_patches.vocab.schema import PHASES


def pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


CYCLE_NOTE = ("the tok/s rows count the GPU cycle only, over the steady cycles of every logged batch size, ramp "
              "included; advise prices median cycles of the batch sizes the traffic held, plus the GPU gap before "
              "each, so its tok/s for the logged chain differs from these")
SHARES_NOTE = ("shares: draft, verify and extend are parts of the GPU cycle; the host gap and the GPU gap lie "
               "between cycles, are given relative to the cycle time and overlap each other, so they are not summed with them")


def _first_rank_with(summaries: dict, key: str):
    """(the 'rank N: ' prefix or '', the summary, its `key` entry) of the first rank whose entry counts any."""
    for r, s in summaries.items():
        if (s.get(key) or {}).get("n"):
            return (f"rank {r}: " if len(summaries) > 1 else ""), s, s[key]
    return None


def slow_cycles_note(summaries: dict) -> str | None:
    """'shares leave out 5 slow cycles ...' for the first rank that had any, else None."""
    if not (found := _first_rank_with(summaries, "slow_cycles")):
        return None
    rank, s, slow = found
    with_them = ", ".join(f"{p} {pct(s['phases'][p]['share_all'])}" for p in PHASES)
    return (f"{rank}shares leave out {slow['n']} slow cycle(s) (over about {slow['factor']:g}x the median cycle "
            f"of their batch size: warm-up, graph capture, first-use compiles; {slow['ms'] / 1000:.2f} s in "
            f"all); with them: {with_them}")


def idle_waits_note(summaries: dict) -> str | None:
    """'gap shares leave out 2 idle wait(s) ...' for the first rank that had any, else None."""
    if not (found := _first_rank_with(summaries, "idle_waits")):
        return None
    rank, s, idle = found
    ph, kinds = s["phases"], s.get("kinds") or ("decode",)  # a wait before a prefill has no factor
    rule = ", or ".join([f"a gap over {idle['min_ms']:g} ms and {idle['factor']:g} decode cycles"] * ("decode" in kinds)
                       + [f"{'any gap' if 'decode' not in kinds else 'one'} over {idle['min_ms']:g} ms before a prefill"]
                       * ("prefill" in kinds))
    return (f"{rank}gap shares leave out {idle['n']} idle wait(s) between cycles ({rule}: no request to run, or a "
            f"host stall; {idle['ms'] / 1000:.2f} s in all); every cycle and wait counted: host gap "
            f"{pct(ph['host_gap']['share_all'])}, gpu gap {pct(ph['gpu_gap']['share_all'])}")
