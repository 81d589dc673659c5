"""The `report --png` figure: phase times over cycles (y-axis clipped at a high percentile, the
clipped cycles marked), each phase's share of the cycle, the accept-length histogram, per-position
acceptance P(accepted > k), and the accept length and (with a baseline) the x plain decode figure
in large type with the advice in words; the title names the configuration, the batch sizes and the
verdict's first line (whatif/verdict.py). matplotlib with the Agg backend, no pyplot global
state."""
from __future__ import annotations

import os
import textwrap

from sglang_patches.cliargs import atomic_output
from sglang_patches.errors import UserError
from sglang_patches.vocab.schema import PHASES
from sglang_patches.vocab.stats import SLOW_CYCLE_FACTOR, percentile
from sglang_patches.whatif.verdict import FIRST_DRAFT_LOW

MAX_POINTS = 2000  # per-cycle series longer than this are averaged into this many bins
CLIP_PERCENTILE = 99.0  # the phase plot's y-axis ends just above this percentile of the per-cycle total
CLIP_HEADROOM = 1.15
COLORS = {"draft": "#4C72B0", "verify": "#DD8452", "extend": "#55A868", "other": "#BBBBBB",
          "host_gap": "#8172B3", "gpu_gap": "#937860"}


def check_png_path(path: str, force: bool = False) -> None:
    """Fail fast (UserError) when the PNG cannot or should not be written; creates nothing permanent.
    A name not ending in .png is refused (`--png cfg.json` replaced a config with an image), and so
    is an existing file unless --force."""
    if os.path.isdir(path):
        raise UserError(f"--png {path}: is a directory; give a file name such as {os.path.join(path, 'timing.png')}")
    if not path.lower().endswith(".png"):
        raise UserError(f"--png {path}: the figure is a PNG image; give a name ending in .png")
    if os.path.exists(path) and not force:
        raise UserError(f"--png {path}: already exists; pass --force to overwrite it, or give another name")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise UserError(f"--png {path}: directory {parent} does not exist; create it first")
    try:
        if os.path.exists(path):
            with open(path, "ab"):  # append mode: probes writability without truncating
                pass
        else:
            with open(path, "xb"):
                pass
            os.unlink(path)
    except OSError as err:
        raise UserError(f"--png {path}: cannot write there ({err.strerror or err})") from None
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UserError("--png needs matplotlib; install it with: pip install matplotlib (from the source tree: "
                        "pip install -e '.[report]')") from None


def downsample(xs: list, ys: dict, max_points: int = MAX_POINTS):
    """Average consecutive cycles into at most `max_points` bins (x = first cycle of the bin)."""
    n = len(xs)
    if n <= max_points:
        return list(xs), {k: list(v) for k, v in ys.items()}
    bx, by = [], {k: [] for k in ys}
    for b in range(max_points):
        lo, hi = b * n // max_points, (b + 1) * n // max_points
        if hi <= lo:
            continue
        bx.append(xs[lo])
        for k, v in ys.items():
            by[k].append(sum(v[lo:hi]) / (hi - lo))
    return bx, by


def clip_limit(totals: list[float]) -> tuple[float | None, list[int]]:
    """(y limit, indices of the cycles above it): CLIP_HEADROOM x the CLIP_PERCENTILE-th percentile
    of the per-cycle totals, or of the slow-cycle cut (SLOW_CYCLE_FACTOR x the median, as the shares use)
    where that is lower (a short log's p99 is a warm-up cycle), so a few warm-up cycles (300 ms against
    6 ms) do not flatten the rest; None (no clipping) when nothing lies above."""
    if not totals:
        return None, []
    ordered = sorted(totals)
    limit = CLIP_HEADROOM * min(percentile(ordered, CLIP_PERCENTILE), SLOW_CYCLE_FACTOR * percentile(ordered, 50))
    above = [i for i, t in enumerate(totals) if t > limit]
    return (limit, above) if above and limit > 0 else (None, [])


def _grouped_bars(ax, summaries: dict, key: str, x_offset: int):
    ranks = list(summaries)
    width = 0.8 / max(len(ranks), 1)
    for i, r in enumerate(ranks):
        vals = [v if v is not None else 0.0 for v in summaries[r][key]]
        xs = [k + x_offset + (i - (len(ranks) - 1) / 2) * width for k in range(len(vals))]
        ax.bar(xs, vals, width=width, label=f"rank {r}")
    if len(ranks) > 1:
        ax.legend(fontsize="small")


def _phase_panel(ax, series: dict) -> None:
    if not series:
        ax.set_title("phase time per cycle (no cycles)")
        return
    r0 = min(series)
    s = series[r0]
    parts = {p: s[p] for p in PHASES}
    # the cycle's time in no phase (a prefill's target forward, launch gaps inside the cycle) on top
    phase_sum = [sum(vals) for vals in zip(*parts.values())]
    parts["other"] = [max(0.0, (c if c is not None else t) - t) for c, t in zip(s.get("cycle_ms") or phase_sum, phase_sum)]
    totals = [t + o for t, o in zip(phase_sum, parts["other"])]
    limit, above = clip_limit(totals)
    xs, ys = downsample(s["cycle"], parts)
    if xs:
        ax.stackplot(xs, *ys.values(), labels=[p if p != "other" else "other in cycle" for p in ys],
                     colors=[COLORS[p] for p in ys], alpha=0.85)
    title = f"phase time per cycle (rank {r0})"
    if limit is not None:
        ax.set_ylim(0, limit)
        cx = [s["cycle"][i] for i in above]
        ax.plot(cx, [limit * 0.985] * len(cx), linestyle="none", marker="^", color="#C44E52", markersize=6,
                label=f"{len(above)} cycle(s) above the axis (max {max(totals):.0f} ms)", clip_on=False)
        title += f"; y-axis clipped at {limit:.0f} ms"
    ax.set_title(title, fontsize="medium")
    ax.legend(loc="upper right", fontsize="small")
    ax.set_xlabel("cycle")
    ax.set_ylabel("GPU ms (stacked)")


def _share_panel(ax, summaries: dict) -> None:
    """One bar per phase: its share of the GPU cycle; the gaps (between cycles, relative to the
    cycle time, overlapping each other) hatched beside them."""
    names = list(PHASES) + ["other", "host_gap", "gpu_gap"]
    ranks = list(summaries)
    width = 0.8 / max(len(ranks), 1)
    for i, r in enumerate(ranks):
        ph = summaries[r]["phases"]
        shares = [ph[p]["share"] for p in PHASES]
        other = None if all(x is None for x in shares) else max(0.0, 1.0 - sum(x or 0.0 for x in shares))
        vals = shares + [other, ph["host_gap"]["share"], ph["gpu_gap"]["share"]]
        for k, (name, v) in enumerate(zip(names, vals)):
            x = k + (i - (len(ranks) - 1) / 2) * width
            # the host's time between cycles costs only where the GPU waits for it (the next bar): SGLang
            # prepares the next batch while the GPU runs the current one. Drawn faint, not as time lost
            ax.bar(x, 100 * (v or 0.0), width=width, color=COLORS[name], hatch="//" if "gap" in name else None,
                   edgecolor="white" if "gap" in name else None, alpha=0.35 if name == "host_gap" else 1.0)
            if v is not None:
                ax.text(x, 100 * v, f"{100 * v:.0f}", ha="center", va="bottom", fontsize="x-small")
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(["draft", "verify", "extend", "other", "host gap*\n(costs only\nas GPU idle)", "GPU idle\nbetween\ncycles*"],
                       fontsize="small")
    ax.set_ylabel("% of GPU cycle time")
    ax.set_ylim(0, ax.get_ylim()[1] * 1.1)
    ax.set_title("share of the cycle" + (f" (ranks {', '.join(map(str, ranks))})" if len(ranks) > 1 else ""),
                 fontsize="medium")
    ax.set_xlabel("* idle time between cycles, not part of the cycle: % of the cycle time\n"
                  "(the two overlap; waits for requests left out)", fontsize="x-small")


def _text_panel(ax, summaries: dict, advice: dict | None) -> None:
    """The figures at a glance in large type (accept length; with a baseline the x plain decode of the
    chain the verdict names), then the verdict's other lines and the advice in small type."""
    ax.axis("off")
    advice = advice or {}
    r0 = min(summaries) if summaries else None
    acc = summaries[r0]["accept_length"] if r0 is not None else None
    big = f"accept length {acc:.2f}" if acc is not None else "accept length -"
    if r0 is not None and summaries[r0].get("simulated_records"):
        big += " (SIMULATED)"
    ratio = (advice.get("best") or {}).get("ratio_to_no_spec") if advice.get("baseline") else None
    ax.text(0, 1, big, va="top", ha="left", fontsize=22 if len(big) <= 22 else 18, fontweight="bold",
            transform=ax.transAxes)  # '(SIMULATED)' at 22 pt ran past the figure's right edge
    ax.text(0, 0.86, f"{ratio:.2f}x plain decode" if ratio is not None else "no plain decode baseline",
            va="top", ha="left", fontsize=22 if ratio is not None else 14, fontweight="bold",
            color=("#2E7D32" if ratio > 1 else "#C44E52") if ratio is not None else "#777777", transform=ax.transAxes)
    if ratio is not None:  # the figure is the advised chain's, which need not be the logged one: named
        chain = advice.get("best_chain") or "-"
        ax.text(0, 0.765, (f"predicted for {chain}, the least-losing chain (none pays)"
                           if advice.get("drafter_accepts_nothing") else f"predicted for {chain}"),
                va="top", ha="left", fontsize="medium", color="#444444", transform=ax.transAxes)
    head = list(advice.get("verdict_lines") or [])
    lines = list(advice.get("lines") or [])
    from sglang_patches.whatif.advisor import NO_BASELINE  # the baselines to give: all three lines or none

    skip = set(NO_BASELINE.split("\n"))
    body = [ln for ln in lines[len(head):-1] if ln not in skip
            and not ln.startswith(("low acceptance, cause", "preflight for causes"))]
    text = "\n".join(textwrap.fill(ln, 70) for ln in head[1:] + body[:3])  # head[0] is the title
    ax.text(0, 0.70, text, va="top", ha="left", fontsize="small", family="monospace", transform=ax.transAxes)


def plot_report(path: str, series: dict, summaries: dict, title: str = "spec timing",
                advice: dict | None = None) -> None:
    """Write the PNG. `series[rank]` = {"cycle": [...], "draft": [...], ...} (ms, null as 0);
    `summaries[rank]` = WindowStats.summary(); `advice` = report's advice object. The phase panel
    shows the lowest rank."""
    import matplotlib
    matplotlib.use("Agg", force=True)
    from matplotlib.figure import Figure

    fig = Figure(figsize=(17, 9), layout="constrained")
    axes = fig.subplot_mosaic([["phase", "phase", "share"], ["acc", "pos", "text"]])
    head = ((advice or {}).get("verdict_lines") or [""])[0]
    color = ("#C44E52" if (advice or {}).get("drafter_accepts_nothing") else
             "#D17A00" if (advice or {}).get("drafter_accepts_little") else "black")
    fig.suptitle(title + ("\n" + head if head else ""), color=color, fontweight="bold", fontsize="x-large")

    _phase_panel(axes["phase"], series)
    _share_panel(axes["share"], summaries)

    ax2, ax3 = axes["acc"], axes["pos"]
    _grouped_bars(ax2, summaries, "accepted_hist", x_offset=1)  # accepted a -> accept length a+1
    ax2.set_title("accept length per request-cycle", fontsize="medium")
    ax2.set_xlabel("accept length (accepted + 1)")
    ax2.set_ylabel("request-cycles")

    _grouped_bars(ax3, summaries, "pos_rates", x_offset=0)
    ax3.set_title("acceptance by draft position: P(accepted > k)", fontsize="medium")
    ax3.set_xlabel("draft position k (counts when accepted > k)")
    ax3.set_ylabel("rate")
    ax3.set_ylim(0, 1.05)
    ax3.axhspan(0.6, 0.8, xmin=0, xmax=1 / max(len(summaries[min(summaries)]["pos_rates"]), 1) if summaries else 0.2,
                color="#2E7D32", alpha=0.12, label="EAGLE-3 heads' first draft on their own kind of text")
    ax3.axhline(FIRST_DRAFT_LOW, color="#D17A00", linestyle="--", linewidth=1,
                label=f"first draft under {FIRST_DRAFT_LOW:.0%}: the drafter accepts little")
    ax3.legend(loc="upper right", fontsize="x-small")
    for ax, key, off in ((ax2, "accepted_hist", 1), (ax3, "pos_rates", 0)):
        n = max((len(summaries[r][key]) for r in summaries), default=0)
        ax.set_xticks(list(range(off, n + off)))

    _text_panel(axes["text"], summaries, advice)

    try:
        with atomic_output(path) as tmp:
            fig.savefig(tmp, format="png", dpi=100)
    except OSError as err:
        raise UserError(f"--png {path}: cannot write ({err.strerror or err})") from None
