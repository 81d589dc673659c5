"""Read py-spy's speedscope JSON: per-thread sampled profiles -> top functions by self time.

Format (https://www.speedscope.app/file-format-schema.json, as py-spy 0.4 writes it):
`shared.frames` = [{name, file, line}], `profiles` = [{type: "sampled", name: 'Thread 123 "MainThread"',
unit: "seconds", samples: [[frame index, root first ... leaf last]], weights: [seconds per sample]}].
py-spy leaves out idle samples unless run with --idle, so a thread's sampled time is its busy time.
Self time of a function = weight of the samples whose leaf frame is that function (all its lines).
"""
from __future__ import annotations

import json
import os
from collections import defaultdict


def load(path: str) -> dict:
    with open(path) as f:
        data = json.load(f)
    if not isinstance(data, dict) or "profiles" not in data or "shared" not in data:
        raise ValueError(f"{path} is not a speedscope file (no 'profiles'/'shared')")
    return data


def short_file(path: str | None) -> str:
    """Trim a source path to something readable: from site-packages / dist-packages on, else the name."""
    if not path:
        return "?"
    for marker in ("site-packages/", "dist-packages/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return os.path.basename(path)


def _weights(profile: dict) -> list[float]:
    samples = profile.get("samples") or []
    weights = profile.get("weights")
    if not weights or len(weights) != len(samples):
        return [1.0] * len(samples)
    return [float(w) for w in weights]


def threads(data: dict) -> list[dict]:
    """[{name, samples, seconds}] per sampled profile (thread), busiest first."""
    out = []
    for prof in data.get("profiles") or []:
        if prof.get("type") != "sampled":
            continue
        w = _weights(prof)
        out.append({"name": prof.get("name", "?"), "samples": len(w), "seconds": sum(w)})
    return sorted(out, key=lambda t: -t["seconds"])


def top_functions(data: dict, n: int = 15, thread_filter: str | None = None) -> list[dict]:
    """Top `n` functions by self time over all sampled threads (or those whose name contains
    `thread_filter`): [{function, file, line, self_s, self_share, total_s, total_share}].
    Shares are of all sampled (busy) time of the threads considered; total counts a function once
    per sample even when it recurses."""
    frames = data["shared"]["frames"]
    self_w: dict[tuple, float] = defaultdict(float)
    total_w: dict[tuple, float] = defaultdict(float)
    line_w: dict[tuple, dict] = defaultdict(lambda: defaultdict(float))
    grand = 0.0
    for prof in data.get("profiles") or []:
        if prof.get("type") != "sampled" or (thread_filter and thread_filter not in prof.get("name", "")):
            continue
        for stack, w in zip(prof.get("samples") or [], _weights(prof)):
            grand += w
            if not stack:
                continue
            leaf = frames[stack[-1]]
            key = (leaf.get("name", "?"), leaf.get("file"))
            self_w[key] += w
            line_w[key][leaf.get("line")] += w
            for fkey in {(frames[i].get("name", "?"), frames[i].get("file")) for i in stack}:
                total_w[fkey] += w
    ranked = sorted(self_w.items(), key=lambda kv: -kv[1])[:n]
    out = []
    for (name, file), w in ranked:
        lines = line_w[(name, file)]
        out.append({"function": name, "file": short_file(file), "line": max(lines, key=lines.get),
                    "self_s": w, "self_share": w / grand if grand else None,
                    "total_s": total_w[(name, file)],
                    "total_share": total_w[(name, file)] / grand if grand else None})
    return out


def stacks(data: dict):
    """Yield (thread name, [function names root first], weight) for every sample: input for the SVG."""
    frames = data["shared"]["frames"]
    names = [f"{f.get('name', '?')} ({short_file(f.get('file'))}:{f.get('line')})" for f in frames]
    for prof in data.get("profiles") or []:
        if prof.get("type") != "sampled":
            continue
        for stack, w in zip(prof.get("samples") or [], _weights(prof)):
            yield prof.get("name", "?"), [names[i] for i in stack], w
