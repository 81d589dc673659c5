"""Measured verify cost over draft tokens (`advise --verify-cost`): the verify GPU time of T draft tokens
over a plain decode step, by batch size, from `benchmarks/verify_cost.py`'s summary.json.

Without it the advisor holds verify constant across chains: fair for a dense target at small batch,
where a verify of T tokens reads the same weights as a decode step. An MoE verify reads the experts
its T tokens route to (up to top_k x T of them per layer), so a longer chain costs more verify. With
it, a chain of s steps (T = s + 1) at batch b is priced as

    verify(s) = verify(logged) x r(b, s + 1) / r(b, logged + 1)

with r linear between measured draft-token counts and taken from the nearest measured batch size (log
scale). Below the smallest measured count r is held at its value there (a verify carries a fixed part: a
dense 8B measured 1.27 at T = 2, not the 1.0 of one decode token); above the largest the last measured
slope goes on, and the notes say so. Measure the T the advice will price (verify_cost.py --draft-tokens).
The ratios are the measured model's: a fixture with fewer experts than the served model (kimi-k2-mla: 16
where Kimi-K2 has 384) reaches all its experts at smaller T and understates how verify grows.
The draft phase keeps the advisor's own scaling; the draft-extend is held constant."""
from __future__ import annotations

import json
from pathlib import Path

from sglang_patches.errors import UserError
from sglang_patches.whatif.cost_model import nearest_batch


class VerifyRatios:
    """verify / plain step ratios {bs: {T: ratio}} of one fixture (or model) from one measurement."""

    prices_draft = False    # the advisor scales the draft itself (advisor.draft_ms)
    kind = "verify ratios"

    def __init__(self, table: dict[int, dict[int, float]], source: str, plain_steps: dict[int, float] | None = None,
                 fixture: str | None = None, routing: str | None = None, joined: bool = False):
        self.table = {bs: dict(sorted(row.items())) for bs, row in sorted(table.items()) if row}
        self.source = source
        self.plain_steps = dict(sorted((plain_steps or {}).items()))  # bs -> the measurement's plain step ms
        self.fixture, self.routing = fixture, routing  # what was measured, and how its experts were routed
        self.joined = joined  # several runs, each verify over the first run's plain step (load_verify_ratios)
        if not self.table:
            raise UserError(f"--verify-cost {source}: no measured verify ratio; give a verify_cost.py summary.json "
                            "whose run measured at least one draft-token count against its baseline")

    def batch_for(self, bs: int) -> int:
        """The measured batch size nearest `bs` in log scale (the advisor's rule, cost_model.nearest_batch)."""
        return nearest_batch(self.table, bs)

    def ratio(self, bs: int, tokens: int) -> float:
        row = self.table[self.batch_for(bs)]
        points = sorted(row.items())
        if tokens in row:
            return row[tokens]
        if tokens < points[0][0] or len(points) == 1:  # held at the nearest measured count
            return points[0][1] if tokens < points[0][0] else points[-1][1]
        if tokens > points[-1][0]:  # the last measured slope goes on
            (t0, r0), (t1, r1) = points[-2], points[-1]
        else:
            t1, r1 = next((t, r) for t, r in points if t > tokens)
            t0, r0 = max((t, r) for t, r in points if t < tokens)
        return r0 + (r1 - r0) * (tokens - t0) / (t1 - t0)

    def verify_delta_ms(self, bs: int, verify_ms: float, steps_from: int, steps_to: int) -> float:
        """Change of the logged verify `verify_ms` (at `steps_from`) when the chain has `steps_to` steps."""
        r0 = self.ratio(bs, steps_from + 1)
        return verify_ms * (self.ratio(bs, steps_to + 1) / r0 - 1.0) if r0 > 0 else 0.0

    def log_mismatch(self, obs, baseline_ms: dict, tolerance: float = 1.25, alarm: float = 1.5) -> list[str]:
        """One note when the log's own verify / plain step at its draft tokens is off the measured ratio by more
        than `tolerance` at some batch size: the measurement is likely another model, routing or context, and
        its growth over draft tokens may not be this server's (the logged verify itself stays the anchor). Off by
        more than `alarm`, the note is a warning, which advise prints right after the verdict: the baseline or
        the measurement is not this server's, and the x plain figures may be too (an INT4 target's log against
        the bf16 fixture's steps read 1.26x where the measurement says 2.33x)."""
        off, worst = [], (1.0, None)
        for c in obs.costs:
            base = baseline_ms.get(c.bs)
            if not base or not c.verify_ms or self.batch_for(c.bs) != c.bs:  # a borrowed batch may differ anyway
                continue
            logged, measured = c.verify_ms / base, self.ratio(c.bs, obs.steps + 1)
            if measured > 0 and not 1 / tolerance <= logged / measured <= tolerance:
                off.append(f"batch {c.bs} {logged:.2f}x vs {measured:.2f}x")
                worst = max(worst, (max(logged / measured, measured / logged), (c.bs, logged, measured)))
        if not off:
            return []
        if worst[0] > alarm:  # at most 120 characters, as a verdict line
            bs, logged, measured = worst[1]
            return [f"warning: batch {bs}: the log's verify is {logged:.2f}x the plain step given, --verify-cost's "
                    f"{measured:.2f}x: one is not this server's",
                    "--verify-cost: its growth over draft tokens is applied to the log's own verify, so the table "
                    "keeps this server's verify at the logged draft tokens; to trust the other chains, measure this "
                    "model's (python benchmarks/verify_cost.py --model TARGET_DIR --draft DRAFT_DIR, its router and "
                    "expert count) and give a baseline of this server's plain steps"]
        return [f"--verify-cost: the log's verify over its plain step at {obs.steps + 1} draft tokens differs from the "
                f"measurement's ({'; '.join(off[:4])}{'; ...' if len(off) > 4 else ''}; a baseline with the gap "
                "between steps reads a little low): measured on another model, routing or context? its growth over "
                "draft tokens may not be this server's"]

    def describe(self) -> str:
        rows = "; ".join(f"batch {bs}: " + ", ".join(f"T{t} {r:.2f}" for t, r in row.items())
                         for bs, row in self.table.items())
        joined = "; joined: each verify over the first file's plain step" if self.joined else ""
        if all(len(row) == 1 for row in self.table.values()):  # no slope: every chain's verify stays the logged one
            return (f"verify / plain step measured in {self.source} ({rows}{joined}): one draft-token count per batch "
                    "size, so every chain keeps the logged verify, as without --verify-cost; measure "
                    "verify_cost.py --draft-tokens 2,4,8 for its growth")
        return (f"verify / plain step measured in {self.source} ({rows}{joined}); held below the smallest measured draft "
                f"tokens, linear between, the last slope beyond the largest")


def load_verify_ratios(spec: str) -> VerifyRatios:
    """`SUMMARY.json[:FIXTURE]`, or several summaries of one fixture joined by commas (`A.json,B.json[:FIXTURE]`:
    runs that measured different draft tokens, e.g. a --deadline cut the first). Joined, every ratio is put
    over the first run's plain step at its batch size (verify ms / that step: one baseline), a cell measured
    twice keeps the first file's, and runs whose routing or plain steps differ (by over 10 % at a batch size
    both measured) are refused: another machine or model."""
    path, _, fixture = spec.rpartition(":") if ":" in spec and not Path(spec).is_file() else (spec, "", "")
    if "," not in path or Path(path).is_file():
        if "," in fixture:
            raise UserError(f"--verify-cost {spec}: the fixture goes after the last file: A.json,B.json:FIXTURE")
        return _load_one(spec)
    paths = path.split(",")
    if not all(paths):
        raise UserError(f"--verify-cost {spec}: an empty file name in the list; give A.json,B.json[:FIXTURE]")
    runs = [_load_one(p + (f":{fixture}" if fixture else ""), shown=spec) for p in paths]
    first = runs[0]
    table = {bs: dict(row) for bs, row in first.table.items()}
    plain = {bs: (ms, paths[0]) for bs, ms in first.plain_steps.items()}  # bs -> (ms, the file it came from)
    for p, r in zip(paths[1:], runs[1:]):
        if (r.fixture, r.routing) != (first.fixture, first.routing):
            raise UserError(f"--verify-cost {spec}: {p} measured {r.fixture} ({r.routing or 'model'} routing), "
                            f"{paths[0]} {first.fixture} ({first.routing or 'model'} routing); join runs of one fixture")
        for bs, ms in r.plain_steps.items():
            if bs in plain and abs(ms / plain[bs][0] - 1.0) > 0.10:
                raise UserError(f"--verify-cost {spec}: plain step at batch {bs} {ms:.2f} ms in {p}, {plain[bs][0]:.2f} "
                                f"in {plain[bs][1]}: another machine or model? join runs of one setup")
            plain.setdefault(bs, (ms, p))
        for bs, row in r.table.items():
            # this run's ratios are over its own plain step: put them over the joined one (the first measured)
            rebase = r.plain_steps[bs] / plain[bs][0] if bs in r.plain_steps and bs in plain else 1.0
            for t, v in row.items():
                table.setdefault(bs, {}).setdefault(t, v * rebase)
    return VerifyRatios(table, first.source.replace(paths[0], ", ".join(paths), 1), {bs: v[0] for bs, v in plain.items()},
                        first.fixture, first.routing, joined=True)


def _load_one(spec: str, shown: str | None = None) -> VerifyRatios:
    """`SUMMARY.json` or `SUMMARY.json:FIXTURE` (verify_cost.py's summary; the fixture is needed when the
    run measured several)."""
    path, _, fixture = spec.rpartition(":") if ":" in spec and not Path(spec).is_file() else (spec, "", "")
    p = Path(path)
    if p.is_dir():
        raise UserError(f"--verify-cost {path}: a directory; give the summary.json in it (benchmarks/verify_cost.py's "
                        "--out), optionally SUMMARY.json:FIXTURE")
    if not p.is_file():
        raise UserError(f"--verify-cost {spec}: no such file; give the summary.json of benchmarks/verify_cost.py "
                        "(optionally SUMMARY.json:FIXTURE)")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise UserError(f"--verify-cost {path}: not JSON ({type(err).__name__}); give verify_cost.py's summary.json") from None
    tables = data.get("verify_over_step_by_fixture") if isinstance(data, dict) else None
    if not isinstance(tables, dict) or not tables:
        raise UserError(f"--verify-cost {path}: no verify_over_step_by_fixture table; give the summary.json "
                        "benchmarks/verify_cost.py writes")
    measured = {f: t for f, t in tables.items() if _cells(t)}
    if fixture:
        if fixture not in tables:
            raise UserError(f"--verify-cost {shown or spec}: no fixture {fixture!r} in {path}; it has "
                            f"{', '.join(sorted(tables))}")
        chosen = fixture
    elif len(measured) == 1:
        chosen = next(iter(measured))
    else:
        raise UserError(f"--verify-cost {path}: {'several' if measured else 'no'} measured fixtures "
                        f"({', '.join(sorted(measured)) or 'none'}); name one: --verify-cost {path}:FIXTURE")
    table = {}
    for bs, t, v in _cells(tables[chosen]):
        table.setdefault(bs, {})[t] = v
    routing = data.get("routing")
    moe = (data.get("moe") or {}).get(chosen) if isinstance(data.get("moe"), dict) else None
    experts = (f", {moe['experts']} experts top {moe['top_k']}: a model with more grows more with draft tokens"
               if isinstance(moe, dict) and moe.get("experts") and moe.get("top_k") else "")
    label = f"{path} ({chosen}" + (f", {routing} routing" if routing else "") + experts + ")"
    rows = data.get("rows") if isinstance(data.get("rows"), list) else []
    plain = {r["bs"]: float(r["step_ms"]) for r in rows if isinstance(r, dict) and r.get("fixture") == chosen
             and r.get("draft_tokens") is None and isinstance(r.get("bs"), int) and r["bs"] > 0
             and isinstance(r.get("step_ms"), (int, float)) and r["step_ms"] > 0}
    return VerifyRatios(table, label, plain, chosen, routing)


def _cells(table) -> list[tuple[int, int, float]]:
    """(batch size, draft tokens, ratio) of one fixture's {bs: {T: ratio}} table; null cells left out; a
    key that is not a positive integer or a ratio that is not a positive number refused in one line."""
    out = []
    for bs, row in (table.items() if isinstance(table, dict) else ()):
        for t, v in (row.items() if isinstance(row, dict) else ()):
            if v is None:
                continue
            try:
                b, n = int(bs), int(t)
            except (TypeError, ValueError):
                b = n = 0
            if b < 1 or n < 1 or isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
                raise UserError(f"--verify-cost: cell batch {bs!r}, draft tokens {t!r} = {v!r} is not a positive "
                                "ratio at positive integer keys; give verify_cost.py's summary.json unchanged")
            out.append((b, n, float(v)))
    return out
