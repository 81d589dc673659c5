"""Which server runs the timing logs given together came from. A server numbers each rank's records from 0
at its start and writes them to one file, appended across restarts and rotated into PATH.1, PATH.2, ...
when large (server/timing/jsonl_sink.py). So, per rank:
  * a file whose first record is another file's first record is a copy: its records would count twice;
  * a file that starts after another ends, with larger cycle numbers, continues that run (a rotated part);
  * anything else (numbers starting over, within a file or across files) is another run.
A plain server's log (no drafting record: a baseline given as a second LOG) is left out of the run count.
Two runs are pooled as one traffic by every reader; LogReader says so once."""
from __future__ import annotations

from sglang_patches.errors import UserError


class RunTracker:
    def __init__(self):
        self.parts: dict = {}  # (path, rank) -> {"first", "last": (cycle, t), "restarts": int, "drafting": bool}

    def add(self, path: str, rec: dict) -> None:
        mark = (rec["cycle"], rec["t"])
        part = self.parts.get((path, rec["rank"]))
        if part is None:
            part = self.parts[path, rec["rank"]] = {"first": mark, "last": mark, "restarts": 0, "drafting": False}
        elif rec["cycle"] < part["last"][0]:  # the counter started over: the server restarted, appending
            part["restarts"] += 1
        part["last"] = mark
        part["drafting"] |= rec["steps"] > 0 and not rec.get("plain")

    def check(self) -> str | None:
        """Raise UserError on a copy; the warning text when a rank's records span several runs, else None."""
        for rank in sorted({r for _, r in self.parts}):
            parts = sorted(((p, s) for (p, r), s in self.parts.items() if r == rank), key=lambda x: x[1]["first"][1])
            seen: dict = {}
            for path, s in parts:
                if s["first"] in seen:
                    raise UserError(f"{path}: holds the same rank-{rank} records as {seen[s['first']]} (a copy?); "
                                    "pass one of them, or its records count twice")
                seen[s["first"]] = path
            drafting = [(p, s) for p, s in parts if s["drafting"]]
            runs = 1 + sum(s["restarts"] for _, s in drafting)
            for (_, a), (_, b) in zip(drafting, drafting[1:]):
                if not (b["first"][0] > a["last"][0] and b["first"][1] >= a["last"][1]):
                    runs += 1
            if drafting and runs > 1:
                where = ", ".join(p for p, _ in drafting)
                return (f"rank {rank}'s cycles come from {runs} server runs ({where}; cycle numbers start over): "
                        "pooled as one traffic; if they differ (model, flags, traffic), give them one at a time")
        return None
