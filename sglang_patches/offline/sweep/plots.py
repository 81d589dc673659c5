"""Sweep PNGs (matplotlib, Agg backend; importing this module needs matplotlib).

sweep_tok_s.png: tok/s vs steps, one line per topk (for topk > 1 the best draft-token value at
each steps), the baseline as a dashed horizontal line; one panel per batch size.
sweep_phases.png: stacked bars of draft / verify / extend p50 ms per configuration; one panel per
batch size.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from sglang_patches.cliargs import atomic_output  # noqa: E402

TOK_S_PNG = "sweep_tok_s.png"
PHASES_PNG = "sweep_phases.png"


def _tok_s_figure(ok: dict[int, list[dict]], path: Path) -> None:
    bss = sorted(ok)
    fig, axes = plt.subplots(1, len(bss), figsize=(4.5 * len(bss), 3.6), squeeze=False)
    for ax, bs in zip(axes[0], bss):
        lines: dict[int, dict[int, float]] = {}
        for r in ok[bs]:
            spec = r.get("spec")
            if spec:
                best = lines.setdefault(spec["topk"], {})
                best[spec["steps"]] = max(best.get(spec["steps"], 0.0), r["tok_s"])
        for topk in sorted(lines):
            xs = sorted(lines[topk])
            ax.plot(xs, [lines[topk][x] for x in xs], marker="o", label=f"topk {topk}")
        base = next((r for r in ok[bs] if r["config"] == "baseline"), None)
        if base:
            ax.axhline(base["tok_s"], color="black", linestyle="--", linewidth=1, label="no speculation")
        ax.set_title(f"batch size {bs}")
        ax.set_xlabel("speculative steps")
        ax.set_ylabel("output tok/s")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("tok/s vs steps (topk > 1: best draft tokens per point)", fontsize=9)
    fig.tight_layout()
    with atomic_output(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)


def _phases_figure(ok: dict[int, list[dict]], path: Path) -> None:
    bss = sorted(ok)
    fig, axes = plt.subplots(len(bss), 1, figsize=(max(6.0, 0.55 * max(len(v) for v in ok.values()) + 2), 3.2 * len(bss)),
                             squeeze=False)
    colors = {"draft": "#4c72b0", "verify": "#dd8452", "extend": "#55a868"}
    for ax, bs in zip(axes[:, 0], bss):
        rows = sorted((r for r in ok[bs] if r.get("phases_p50_ms") and r.get("spec")), key=lambda r: (r["spec"]["topk"], r["spec"]["steps"], r["spec"]["draft_tokens"]))
        names = [r["config"] for r in rows]
        bottom = [0.0] * len(rows)
        for phase, color in colors.items():
            vals = [(r["phases_p50_ms"].get(phase) or 0.0) for r in rows]
            ax.bar(names, vals, bottom=bottom, color=color, label=phase)
            bottom = [b + v for b, v in zip(bottom, vals)]
        ax.set_title(f"batch size {bs}: phase p50 per cycle")
        ax.set_ylabel("ms")
        ax.tick_params(axis="x", labelrotation=45, labelsize=7)
        ax.legend(fontsize=7)
        if not rows:
            ax.text(0.5, 0.5, "no phase timing", ha="center", va="center", transform=ax.transAxes)
    fig.tight_layout()
    with atomic_output(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)


def write_pngs(ok: dict[int, list[dict]], out_dir: str | Path) -> list[str]:
    """Both PNGs from {batch size: ok rows, one per config} (table.split_rows); their paths, none for no rows."""
    if not ok:
        return []
    out_dir = Path(out_dir)
    _tok_s_figure(ok, out_dir / TOK_S_PNG)
    _phases_figure(ok, out_dir / PHASES_PNG)
    return [str(out_dir / TOK_S_PNG), str(out_dir / PHASES_PNG)]
