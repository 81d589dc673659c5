"""A per-batch-size cost model of EAGLE-3 decoding, fitted on measured sweep rows (pure Python).

For each batch size, from the phase timer's p50s of the measured speculative rows:
    draft_ms  ~ a0 + a * steps + b * steps * (topk - 1)
    verify_ms ~ c + d * draft_tokens
    extend_ms ~ e + f * draft_tokens
    cycle_ms  = draft + verify + extend
(ordinary least squares; all-zero columns are dropped, and the intercept too when there are fewer
rows than coefficients.) Accept length from the per-position acceptance: the timer's pos_rates[k]
= P(accepted > k) give conditional rates r_k = pos_rates[k] / pos_rates[k-1], taken from the
measured row with the most steps for the same topk (else the nearest measured topk; the --search
design measures every topk); for a config
E[accept len] = 1 + sum_{k < K} prod_{j <= k} r_j with K = min(steps, draft_tokens - 1) positions;
beyond the measured positions the last conditional rate repeats. Raw tok/s = bs x accept_len /
cycle seconds; a per-batch-size calibration ratio (median of measured / raw over the measured
rows) absorbs host overhead, prefill and sampling.

Limitations: the tree (topk > 1) acceptance model ignores how draft tokens < steps x topk + 1
prunes side branches (only the depth limit is modelled); rates for an unmeasured topk are
borrowed from the nearest measured one; the last measured conditional rate is repeated for
positions beyond the measured steps; phases are linear in steps / draft tokens per batch size.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from fractions import Fraction

from sglang_patches.whatif.grid import Config, config_name

PHASE_KEYS = ("draft", "verify", "extend")


# ------------------------------------------------------------------ tiny least squares

def solve(a: list[list[float]], b: list[float]) -> list[float]:
    """Gaussian elimination with partial pivoting (a is square)."""
    n = len(b)
    m = [list(map(float, row)) + [float(bv)] for row, bv in zip(a, b)]
    for col in range(n):
        piv = max(range(col, n), key=lambda r: abs(m[r][col]))
        if abs(m[piv][col]) < 1e-300:
            raise ValueError("singular system")
        m[col], m[piv] = m[piv], m[col]
        for r in range(n):
            if r != col and m[r][col]:
                f = m[r][col] / m[col][col]
                m[r] = [x - f * y for x, y in zip(m[r], m[col])]
    return [m[i][n] / m[i][i] for i in range(n)]



def nearest_batch(sizes, bs: int) -> int:
    """The batch size in `sizes` nearest `bs` on a log scale, i.e. by the ratio of the larger to the
    smaller (2 and 8 are equally near 4). Equally near: the smaller size. The ratios are compared
    exactly, as fractions (a float log breaks some ties by rounding: around 6 it put 9 before 4).
    ValueError when `sizes` is empty or a size is not positive."""
    sizes = list(sizes)
    if not sizes or bs <= 0 or min(sizes) <= 0:
        raise ValueError(f"no nearest batch size to {bs} among {sorted(sizes)}: positive sizes needed")
    return min(sizes, key=lambda k: (Fraction(max(k, bs)) / Fraction(min(k, bs)), k))

@dataclass
class LinearFit:
    cols: list[int]          # feature indices used
    coef: list[float]

    def __call__(self, feats: list[float]) -> float:
        return sum(c * feats[j] for c, j in zip(self.coef, self.cols))

    def to_dict(self) -> dict:
        return {"cols": self.cols, "coef": self.coef}


def fit_linear(x: list[list[float]], y: list[float], ridge: float = 1e-9) -> LinearFit:
    """Least squares y ~ x @ coef. Column 0 is the intercept; see the module docstring."""
    if not x:
        raise ValueError("no rows to fit")
    cols = [j for j in range(len(x[0])) if any(abs(row[j]) > 0 for row in x)]
    if len(cols) > len(x) and 0 in cols:
        cols.remove(0)
    cols = cols[:len(x)]
    xt = [[row[j] for j in cols] for row in x]
    k = len(cols)
    ata = [[sum(r[i] * r[j] for r in xt) for j in range(k)] for i in range(k)]
    scale = max((ata[i][i] for i in range(k)), default=1.0) or 1.0
    for i in range(k):
        ata[i][i] += ridge * scale
    aty = [sum(r[i] * yv for r, yv in zip(xt, y)) for i in range(k)]
    return LinearFit(cols, solve(ata, aty))


def draft_features(c: Config) -> list[float]:
    return [1.0, float(c.steps), float(c.steps * (c.topk - 1))]


def ndt_features(c: Config) -> list[float]:
    return [1.0, float(c.draft_tokens)]


# ------------------------------------------------------------------ acceptance

def cond_from_pos(pos_rates: list[float]) -> list[float]:
    out, prev = [], 1.0
    for p in pos_rates:
        out.append(p / prev if prev > 0 else 0.0)
        prev = p
    return out


def chain_accept_length(cond: list[float], positions: int) -> float:
    """1 + sum_{k < positions} prod_{j <= k} cond[j]; the last rate repeats past the measured ones."""
    total, p = 1.0, 1.0
    for k in range(positions):
        r = cond[k] if k < len(cond) else (cond[-1] if cond else 0.0)
        p *= min(max(r, 0.0), 1.0)
        total += p
    return total


def constant_rate(accept_length: float, positions: int) -> float:
    """r with 1 + r + ... + r^positions = accept_length (bisection); for rows without pos_rates."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if chain_accept_length([mid], positions) < accept_length:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def _row_cond(row: dict) -> list[float] | None:
    if row.get("cond_rates"):
        return list(row["cond_rates"])
    if row.get("pos_rates"):
        return cond_from_pos(row["pos_rates"])
    spec, al = row.get("spec") or {}, row.get("accept_length")
    if al and spec:
        positions = min(spec["steps"], spec["draft_tokens"] - 1)
        return [constant_rate(al, positions)] * max(positions, 1)
    return None


# ------------------------------------------------------------------ the model

@dataclass
class BsModel:
    bs: int
    draft: LinearFit
    verify: LinearFit
    extend: LinearFit
    rates: dict = field(default_factory=dict)   # topk -> conditional rates
    calib: float = 1.0
    baseline_tok_s: float | None = None
    n_rows: int = 0

    def cycle_ms(self, c: Config) -> float:
        return (max(self.draft(draft_features(c)), 0.0) + max(self.verify(ndt_features(c)), 0.0)
                + max(self.extend(ndt_features(c)), 0.0))

    def accept_length(self, c: Config) -> float:
        if not self.rates:
            return 1.0
        k = nearest_batch(self.rates, c.topk)  # the logged topk nearest, by the same rule
        return chain_accept_length(self.rates[k], min(c.steps, c.draft_tokens - 1))

    def raw_tok_s(self, c: Config) -> float:
        cyc = self.cycle_ms(c)
        return self.bs * self.accept_length(c) / (cyc / 1000.0) if cyc > 0 else 0.0

    def predict(self, c: Config | None) -> float | None:
        return self.baseline_tok_s if c is None else self.calib * self.raw_tok_s(c)

    def to_dict(self) -> dict:
        return {"bs": self.bs, "draft": self.draft.to_dict(), "verify": self.verify.to_dict(),
                "extend": self.extend.to_dict(), "rates": {str(k): v for k, v in self.rates.items()},
                "calib": self.calib, "baseline_tok_s": self.baseline_tok_s, "n_rows": self.n_rows}


def _phase_rows(rows: list[dict]) -> list[tuple[Config, dict]]:
    out = []
    for r in rows:
        p = r.get("phases_p50_ms") or {}
        if r.get("status") == "ok" and r.get("spec") and all(p.get(k) is not None for k in PHASE_KEYS):
            out.append((Config.from_dict(r["spec"]), r))
    return out


def fit_bs(rows: list[dict], bs: int) -> BsModel | None:
    """Fit the model for one batch size from all rows (rows of other sizes lend acceptance rates)."""
    mine = [r for r in rows if int(r["batch_size"]) == bs and r.get("status") == "ok"]
    pr = _phase_rows(mine)
    if not pr:
        return None
    draft = fit_linear([draft_features(c) for c, _ in pr], [r["phases_p50_ms"]["draft"] for _, r in pr])
    verify = fit_linear([ndt_features(c) for c, _ in pr], [r["phases_p50_ms"]["verify"] for _, r in pr])
    extend = fit_linear([ndt_features(c) for c, _ in pr], [r["phases_p50_ms"]["extend"] for _, r in pr])
    rates: dict[int, list[float]] = {}
    for pool in (mine, [r for r in rows if r.get("status") == "ok"]):
        best: dict[int, tuple] = {}
        for r in pool:
            spec, cond = r.get("spec"), _row_cond(r)
            if spec and cond:
                key = (spec["steps"], spec["draft_tokens"])
                if spec["topk"] not in best or key > best[spec["topk"]][0]:
                    best[spec["topk"]] = (key, cond)
        for k, (_, cond) in best.items():
            rates.setdefault(k, cond)
    base = next((r["tok_s"] for r in mine if r["config"] == "baseline"), None)
    model = BsModel(bs, draft, verify, extend, rates, 1.0, base, len(pr))
    ratios = [r["tok_s"] / model.raw_tok_s(c) for c, r in pr if model.raw_tok_s(c) > 0]
    model.calib = statistics.median(ratios) if ratios else 1.0
    return model


def fit_all(rows: list[dict]) -> dict[int, BsModel]:
    out = {}
    for bs in sorted({int(r["batch_size"]) for r in rows}):
        m = fit_bs(rows, bs)
        if m is not None:
            out[bs] = m
    return out


def predictions(models: dict[int, BsModel], configs: list) -> list[dict]:
    out = []
    for bs, m in sorted(models.items()):
        for c in configs:
            pred = m.predict(c)
            if pred is None:
                continue
            out.append({"batch_size": bs, "config": config_name(c), "predicted": pred,
                        "accept_length": None if c is None else m.accept_length(c),
                        "cycle_ms": None if c is None else m.cycle_ms(c)})
    return out


def ranked(model: BsModel, configs: list) -> list[tuple[float, Config]]:
    return sorted(((model.predict(c), c) for c in configs if c is not None), key=lambda t: (-t[0], t[1]))


def design(plan) -> list:
    """The small measured design: the baseline, min and max steps at topk 1, and per topk > 1 value
    one config at its most steps and draft tokens (acceptance rates are per topk, so each topk gets
    its own measured rates; also the fewest steps of the smallest topk if there is no chain)."""
    spec = plan.speculative
    chains = sorted((c for c in spec if c.topk == 1), key=lambda c: c.steps)
    out: list = [None]
    if chains:
        out += [chains[0], chains[-1]]
    trees = [c for c in spec if c.topk > 1]
    for k in sorted({c.topk for c in trees}):
        same = [c for c in trees if c.topk == k]
        out.append(max(same, key=lambda c: (c.steps, c.draft_tokens)))
        if not chains and k == min(c.topk for c in trees):
            out.append(min(same, key=lambda c: (c.steps, -c.draft_tokens)))
    seen, uniq = set(), []
    for c in out:
        if config_name(c) not in seen:
            seen.add(config_name(c))
            uniq.append(c)
    return uniq


def pick_next(models: dict[int, BsModel], configs: list, measured: set[str], per_bs: int = 2,
              limit: int | None = None) -> list[Config]:
    """The predicted best `per_bs` unmeasured configs of every batch size, taken rank by rank across
    the batch sizes (every batch size's best first, then every second best...), at most `limit`."""
    lists = [[c for _, c in ranked(m, configs) if c.name not in measured][:per_bs]
             for _, m in sorted(models.items())]
    out: list[Config] = []
    for rank in range(per_bs):
        for cands in lists:
            if rank < len(cands) and cands[rank] not in out:
                if limit is not None and len(out) >= limit:
                    return out
                out.append(cands[rank])
    return out


def default_budget(n_speculative: int, n_design: int) -> int:
    """Speculative configurations a search may measure: a third of the grid's (rounded up), never
    fewer than its design."""
    return max(n_design, -(-n_speculative // 3))


def search_budget(plan, requested: int | None = None) -> int:
    """The budget a search of `plan` keeps to: `requested` (default: default_budget), never below the
    number of speculative configurations in its design."""
    n_design = sum(1 for c in design(plan) if c is not None)
    return max(n_design, requested if requested is not None else default_budget(len(plan.speculative), n_design))


def compare(models: dict[int, BsModel], rows: list[dict]) -> list[dict]:
    """Predicted vs measured tok/s for every ok speculative row with a model at its batch size."""
    out = []
    for r in rows:
        m = models.get(int(r["batch_size"]))
        if m is None or r.get("status") != "ok" or not r.get("spec"):
            continue
        pred = m.predict(Config.from_dict(r["spec"]))
        out.append({"batch_size": int(r["batch_size"]), "config": r["config"], "predicted": pred,
                    "measured": r["tok_s"], "error": pred / r["tok_s"] - 1 if r["tok_s"] else 0.0})
    return sorted(out, key=lambda c: (c["batch_size"], -c["measured"]))
