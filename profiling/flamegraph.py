"""A self-contained flamegraph SVG (flamegraph.pl style: root at the bottom, width = sampled time,
hover a box for its name, time and share) built from py-spy's speedscope samples.

py-spy records one output format per run; rendering the SVG from the speedscope file avoids a second
py-spy process on the same scheduler (see pyspy.py). Boxes narrower than `min_width_px` are dropped.
"""
from __future__ import annotations

import hashlib
from html import escape

ROW = 16
FONT = 11


class _Node:
    __slots__ = ("name", "weight", "children")

    def __init__(self, name: str):
        self.name, self.weight, self.children = name, 0.0, {}

    def child(self, name: str) -> "_Node":
        node = self.children.get(name)
        if node is None:
            node = self.children[name] = _Node(name)
        return node


def build_tree(samples) -> _Node:
    """samples: iterable of (thread name, [frames root first], weight) -> merged call tree."""
    root = _Node("all")
    for thread, frames, weight in samples:
        root.weight += weight
        node = root.child(thread)
        node.weight += weight
        for frame in frames:
            node = node.child(frame)
            node.weight += weight
    return root


def _depth(node: _Node) -> int:
    return 1 + max((_depth(c) for c in node.children.values()), default=0)


def _color(name: str) -> str:
    h = hashlib.md5(name.encode()).digest()
    return f"rgb({205 + h[0] % 50},{h[1] % 180 + 40},{h[2] % 55})"


def render(samples, title: str = "py-spy flamegraph", width: int = 1200, min_width_px: float = 0.3) -> str:
    root = build_tree(samples)
    depth = _depth(root)
    height = (depth + 2) * ROW + 10
    total = root.weight or 1.0
    scale = (width - 20) / total
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="monospace" font-size="{FONT}">',
           '<rect width="100%" height="100%" fill="#f8f8f8"/>',
           f'<text x="{width / 2}" y="{ROW}" text-anchor="middle" font-size="{FONT + 3}">'
           f'{escape(title)} ({root.weight:.2f} s sampled)</text>']

    def draw(node: _Node, x: float, level: int) -> None:
        w = node.weight * scale
        if w < min_width_px:
            return
        y = height - (level + 1) * ROW - 5
        tip = f"{node.name} — {node.weight:.3f} s, {100 * node.weight / total:.1f}%"
        out.append(f'<g><title>{escape(tip)}</title><rect x="{x:.2f}" y="{y}" width="{w:.2f}" '
                   f'height="{ROW - 1}" fill="{_color(node.name)}" rx="2"/>')
        chars = int((w - 4) / (FONT * 0.6))
        if chars >= 3:
            label = node.name if len(node.name) <= chars else node.name[: chars - 2] + ".."
            out.append(f'<text x="{x + 2:.2f}" y="{y + ROW - 4}">{escape(label)}</text>')
        out.append("</g>")
        cx = x
        for child in sorted(node.children.values(), key=lambda c: c.name):
            draw(child, cx, level + 1)
            cx += child.weight * scale

    draw(root, 10.0, 0)
    out.append("</svg>")
    return "\n".join(out)


def write(samples, path: str, title: str) -> str:
    with open(path, "w") as f:
        f.write(render(samples, title=title))
    return path
