"""The `report --png` figure: phase times over cycles, accept-length histogram, per-position
conditional acceptance. matplotlib with the Agg backend, no pyplot global state."""
from __future__ import annotations

from sglang_patches.cliargs import atomic_output
from sglang_patches.errors import UserError
from sglang_patches.timing.schema import PHASES

MAX_POINTS = 2000  # per-cycle series longer than this are averaged into this many bins
COLORS = {"draft": "#4C72B0", "verify": "#DD8452", "extend": "#55A868"}


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


def _grouped_bars(ax, summaries: dict, key: str, x_offset: int):
    ranks = list(summaries)
    width = 0.8 / max(len(ranks), 1)
    for i, r in enumerate(ranks):
        vals = [v if v is not None else 0.0 for v in summaries[r][key]]
        xs = [k + x_offset + (i - (len(ranks) - 1) / 2) * width for k in range(len(vals))]
        ax.bar(xs, vals, width=width, label=f"rank {r}")
    if len(ranks) > 1:
        ax.legend(fontsize="small")


def plot_report(path: str, series: dict, summaries: dict, title: str = "spec timing") -> None:
    """Write the 3-panel PNG. `series[rank]` = {"cycle": [...], "draft": [...], ...} (ms, null
    as 0); `summaries[rank]` = WindowStats.summary(). Panel 1 shows the lowest rank."""
    import matplotlib
    matplotlib.use("Agg", force=True)
    from matplotlib.figure import Figure

    fig = Figure(figsize=(15, 4.5), layout="constrained")
    ax1, ax2, ax3 = fig.subplots(1, 3)
    fig.suptitle(title)

    if series:
        r0 = min(series)
        s = series[r0]
        xs, ys = downsample(s["cycle"], {p: s[p] for p in PHASES})
        if xs:
            ax1.stackplot(xs, *(ys[p] for p in PHASES), labels=list(PHASES),
                          colors=[COLORS[p] for p in PHASES], alpha=0.85)
            ax1.legend(loc="upper right", fontsize="small")
        ax1.set_title(f"phase time per cycle (rank {r0})")
    ax1.set_xlabel("cycle")
    ax1.set_ylabel("GPU ms (stacked)")

    _grouped_bars(ax2, summaries, "accepted_hist", x_offset=1)  # accepted a -> accept length a+1
    ax2.set_title("accept length per request-cycle")
    ax2.set_xlabel("accept length (accepted + 1)")
    ax2.set_ylabel("request-cycles")

    _grouped_bars(ax3, summaries, "pos_rates", x_offset=0)
    ax3.set_title("conditional acceptance by draft position")
    ax3.set_xlabel("draft position k (counts when accepted > k)")
    ax3.set_ylabel("rate")
    ax3.set_ylim(0, 1.05)
    for ax in (ax2, ax3):
        n = max((len(summaries[r]["accepted_hist" if ax is ax2 else "pos_rates"]) for r in summaries),
                default=0)
        off = 1 if ax is ax2 else 0
        ax.set_xticks(list(range(off, n + off)))

    try:
        with atomic_output(path) as tmp:
            fig.savefig(tmp, format="png", dpi=100)
    except OSError as err:
        raise UserError(f"--png {path}: cannot write ({err.strerror or err})") from None
