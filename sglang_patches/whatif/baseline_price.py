"""The plain decode step at each logged batch size, from a baseline measured at some batch sizes:
the one rule every answer uses (advise, report, --adaptive-config, a log's own steps-0 cycles).

  * measured at that batch size: used as is;
  * between two measured batch sizes: linear interpolation in the batch size between the nearest
    one below and the nearest one above (a plain decode step grows with the batch: the weights are
    read once per step, the attention and KV reads grow with each request);
  * outside the measured range: refused for that batch size (a step measured at batch 8 is not the
    batch-1 step: on the H200 it read 5.00 ms where batch 1 took 4.67 ms, enough to move the ratio
    by 7 %); the ratio to plain decode then covers only the priced batch sizes, and says so.
"""
from __future__ import annotations

# --baseline-log takes one file: a plain server's runs at several batch sizes go in it one after another
ONE_FILE = "--baseline-step-ms BS:MS, or a plain server's log: several runs' logs can be concatenated into one file"


def price(table: dict, batch_sizes) -> tuple[dict, list[dict]]:
    """({batch size: plain step ms} for the priced ones, [{"bs", "ms" (None: refused), "how"}] for each;
    a refused one also has "measured_at", the batch sizes the baseline was measured at, e.g. "8" or "1-4")."""
    known = sorted(int(b) for b in table)
    out, used = {}, []
    for bs in batch_sizes:
        if bs in table:
            ms, how = table[bs], "measured"
        else:
            lo = max((b for b in known if b < bs), default=None)
            hi = min((b for b in known if b > bs), default=None)
            if lo is None or hi is None:
                span = f"{known[0]}" if len(known) == 1 else f"{known[0]}-{known[-1]}"
                used.append({"bs": bs, "ms": None, "measured_at": span,
                             "how": f"refused: the baseline was measured at batch {span} only, give a plain step "
                                    f"measured at batch {bs} ({ONE_FILE})"})
                continue
            ms = table[lo] + (table[hi] - table[lo]) * (bs - lo) / (hi - lo)
            how = f"interpolated between batch {lo} and {hi}"
        out[bs] = ms
        used.append({"bs": bs, "ms": ms, "how": how})
    return out, used


def one_step(step_ms: float, batch_sizes) -> tuple[dict, list[dict]]:
    """--baseline-step-ms: the user's one plain step for every batch size (said per batch size)."""
    return ({bs: step_ms for bs in batch_sizes},
            [{"bs": bs, "ms": step_ms, "how": "--baseline-step-ms, given for every batch size"} for bs in batch_sizes])


def note(used: list[dict]) -> str:
    """The batch sizes priced by interpolation or refused, in words ("" when all were measured)."""
    odd = [u for u in used if u["how"] != "measured" and not u["how"].startswith("--baseline-step-ms")]
    return "; ".join(f"batch {u['bs']}: {u['how']}" + ("" if u["ms"] is None else f" ({u['ms']:.2f} ms)")
                     for u in odd)


def refused(used: list[dict]) -> list[dict]:
    """The refused entries of price()'s account (a refused batch size has no plain step)."""
    return [u for u in used if u["ms"] is None]


def plain_steps_line(used: list) -> str:
    """'plain decode step used: batch 1 4.67 ms (measured), ...' from baseline_price.price()'s account, in
    batch order; batch sizes priced alike (one --baseline-step-ms for all) share one entry, 'batch 1, 3-8:
    4.09 ms (...)'; so do several measured ones ('batch 1: 4.09, 4: 5.75 ms (measured)'), several
    interpolated ones with the range of their steps ('batch 3, 5-8: 5.20-5.92 ms (interpolated)') and
    the refusals of one measured range."""
    measured = [u for u in used if u["ms"] is not None and u["how"] == "measured"]
    between = [u for u in used if u["ms"] is not None and u["how"].startswith("interpolated")]
    parts, rest = [], list(used)   # (first batch size, text)
    if len(measured) > 1:
        parts.append((measured[0]["bs"], "batch " + ", ".join(f"{u['bs']}: {u['ms']:.2f}" for u in measured)
                      + " ms (measured)"))
        rest = [u for u in rest if u not in measured]
    if len(between) > 1:
        lo, hi = min(u["ms"] for u in between), max(u["ms"] for u in between)
        parts.append((between[0]["bs"], f"batch {ranges([u['bs'] for u in between])}: {lo:.2f}-{hi:.2f} ms "
                                        "(interpolated)"))
        rest = [u for u in rest if u not in between]
    groups: dict = {}
    for u in rest:
        if u["ms"] is None and "measured_at" in u:   # one refusal for every batch size outside one range
            price = ("none", u["measured_at"])
        else:
            price = f"{u['ms']:.2f} ms ({u['how']})" if u["ms"] is not None else f"none ({u['how']})"
        groups.setdefault(price, []).append(u["bs"])
    for price, bss in groups.items():
        if isinstance(price, tuple):
            price = (f"none (refused: the baseline was measured at batch {price[1]} only, give a plain step "
                     f"measured at batch {ranges(bss)} ({ONE_FILE}))")
        parts.append((bss[0], f"batch {ranges(bss)}: {price}"))
    return "plain decode step used: " + (", ".join(text for _, text in sorted(parts, key=lambda p: p[0])) or "none")


def ranges(bss: list) -> str:
    """[1, 3, 4, 5, 8] -> '1, 3-5, 8' (batch sizes in the order given, runs of consecutive ones joined)."""
    runs: list = []
    for b in bss:
        if runs and b == runs[-1][1] + 1:
            runs[-1][1] = b
        else:
            runs.append([b, b])
    return ", ".join(str(a) if a == z else f"{a}-{z}" for a, z in runs)


def contradiction_line(found: list[dict]) -> str:
    """baseline_contradictions' batch sizes in one warning line."""
    if len(found) == 1:
        c = found[0]
        return (f"warning: the baseline contradicts the log: a plain decode step of {c['baseline_ms']:.2f} ms "
                f"at batch {c['bs']} is slower than the logged verify ({c['verify_ms']:.2f} ms) plus the gap "
                f"between cycles ({c['gap_ms']:.2f} ms), which run the same target over more tokens; is the "
                "baseline end to end (prefill included), or of another model, expert routing or GPU?")
    return ("warning: the baseline contradicts the log: at batch " + ", ".join(str(c["bs"]) for c in found)
            + " its plain decode step (" + ", ".join(f"{c['baseline_ms']:.2f}" for c in found)
            + " ms) is slower than the logged verify plus the gap between cycles ("
            + ", ".join(f"{c['verify_ms'] + c['gap_ms']:.2f}" for c in found)
            + " ms), which run the same target over more tokens; is the baseline end to end (prefill included), "
            "or of another model, expert routing or GPU?")
