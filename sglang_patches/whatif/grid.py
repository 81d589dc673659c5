"""Expand a steps x topk x draft-tokens grid into the configurations a sweep runs.

Rules (SGLang 0.5.17, the same source as preflight's SP008, whose rule function in
`vocab/spec_params.py` is reused here):
  * topk 1: SGLang forces draft tokens = steps + 1, so the chain config `s{S}_k1_n{S+1}` runs once
    per steps value whatever --draft-tokens says; the grid's other draft-token values for topk 1
    are listed as skipped duplicates of it.
  * topk > 1: SP008 errors (draft tokens - 1 > topk + (steps-1) x topk^2 candidates: torch.topk
    fails in organize_draft_results; draft tokens < steps + 1: the tree verify crashes) are skipped
    with SP008's message; on top of that the sweep
    skips draft tokens > steps x topk + 1 (more tree nodes than drafted tokens per path x
    branches; SGLang's bench_speculative.py skips the same), and draft tokens < 2 (nothing to verify).
  * the no-speculation baseline (`None`, named "baseline") is always part of the plan, first.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

from sglang_patches.errors import UserError
from sglang_patches.vocab.findings import ERROR
from sglang_patches.vocab.spec_params import sp008_spec_params

BASELINE = "baseline"


@dataclass(frozen=True, order=True)
class Config:
    """One speculative configuration; the baseline is represented by `None`."""
    topk: int
    steps: int
    draft_tokens: int

    @property
    def name(self) -> str:
        return f"s{self.steps}_k{self.topk}_n{self.draft_tokens}"

    def server_flags(self) -> list[str]:
        return ["--speculative-num-steps", str(self.steps), "--speculative-eagle-topk", str(self.topk),
                "--speculative-num-draft-tokens", str(self.draft_tokens)]

    def to_dict(self) -> dict:
        return {"steps": self.steps, "topk": self.topk, "draft_tokens": self.draft_tokens}

    @classmethod
    def from_dict(cls, d: dict | None) -> "Config | None":
        if not d:
            return None
        return cls(topk=int(d["topk"]), steps=int(d["steps"]), draft_tokens=int(d["draft_tokens"]))


def config_name(cfg: Config | None) -> str:
    return BASELINE if cfg is None else cfg.name


@dataclass(frozen=True)
class Skipped:
    steps: int
    topk: int
    draft_tokens: int
    reason: str
    duplicate_of: str | None = None

    @property
    def name(self) -> str:
        return f"s{self.steps}_k{self.topk}_n{self.draft_tokens}"

    def to_dict(self) -> dict:
        return {"name": self.name, "steps": self.steps, "topk": self.topk,
                "draft_tokens": self.draft_tokens, "reason": self.reason, "duplicate_of": self.duplicate_of}


@dataclass
class Plan:
    configs: list = field(default_factory=list)   # [None (baseline), Config, ...]
    skipped: list = field(default_factory=list)   # [Skipped, ...]

    @property
    def speculative(self) -> list[Config]:
        return [c for c in self.configs if c is not None]

    def to_dict(self) -> dict:
        return {"configs": [config_name(c) for c in self.configs],
                "spec": {c.name: c.to_dict() for c in self.speculative},
                "skipped": [s.to_dict() for s in self.skipped]}

    def describe(self) -> str:
        lines = [f"{len(self.configs)} configurations ({len(self.speculative)} speculative + baseline):"]
        for c in self.configs:
            lines.append(f"  {config_name(c):<14}" + ("  no speculation (--patches none)" if c is None else
                         f"  steps {c.steps}, topk {c.topk}, draft tokens {c.draft_tokens}"))
        if self.skipped:
            lines.append(f"{len(self.skipped)} grid points skipped:")
            lines += [f"  {s.name:<14}  {s.reason}" for s in self.skipped]
        return "\n".join(lines)


def parse_int_list(text: str, flag: str, minimum: int = 1) -> list[int]:
    """'1,2, 4' -> [1, 2, 4] (sorted, duplicates dropped); UserError on anything else."""
    values = []
    if not str(text).replace(",", "").strip():
        raise UserError(f"{flag} is empty; give a comma-separated list such as {flag} 1,2,4")
    for part in str(text).split(","):
        part = part.strip()
        if not part:  # `1,,2` or a trailing comma: a value lost in typing, not an empty wish
            raise UserError(f"{flag} {text!r}: an empty item; give a comma-separated list such as {flag} 1,2,4")
        try:
            v = int(part)
        except ValueError:
            raise UserError(f"{flag} {text!r}: {part!r} is not an integer; give a comma-separated list "
                            f"such as {flag} 1,2,4") from None
        if v < minimum:
            raise UserError(f"{flag} {text!r}: {v} is below {minimum}; every value must be >= {minimum}")
        values.append(v)
    return sorted(set(values))


def sglang_errors(steps: int, topk: int, draft_tokens: int) -> list:
    """SP008 error findings for one combination (preflight's rule, not a copy of it)."""
    inp = SimpleNamespace(steps=steps, topk=topk, draft_tokens=draft_tokens)
    return [f for f in sp008_spec_params(inp) if f.severity == ERROR]


def expand_grid(steps: list[int], topks: list[int], draft_tokens: list[int]) -> Plan:
    plan = Plan(configs=[None])
    chosen: set[Config] = set()
    for k in sorted(set(topks)):
        for s in sorted(set(steps)):
            if k == 1:
                chain = Config(topk=1, steps=s, draft_tokens=s + 1)
                if chain not in chosen:
                    chosen.add(chain)
                    plan.configs.append(chain)
                for n in sorted(set(draft_tokens)):
                    if n != s + 1:
                        plan.skipped.append(Skipped(s, 1, n,
                            f"topk 1: SGLang forces draft tokens = steps + 1 = {s + 1}; same run as {chain.name}",
                            duplicate_of=chain.name))
                continue
            for n in sorted(set(draft_tokens)):
                errs = sglang_errors(s, k, n)
                if errs:
                    plan.skipped.append(Skipped(s, k, n, f"SP008: {errs[0].message}"))
                elif n > s * k + 1:
                    plan.skipped.append(Skipped(s, k, n,
                        f"draft tokens {n} > steps x topk + 1 = {s * k + 1} (more tree nodes than "
                        f"drafted tokens per branch; bench_speculative skips these)"))
                elif n < 2:
                    plan.skipped.append(Skipped(s, k, n, "draft tokens 1 leaves no draft token to verify"))
                else:
                    cfg = Config(topk=k, steps=s, draft_tokens=n)
                    if cfg not in chosen:
                        chosen.add(cfg)
                        plan.configs.append(cfg)
    return plan


def parse_config_name(name: str) -> Config | None:
    """'baseline' -> None; 's3_k1_n4' -> Config(...)."""
    if name == BASELINE:
        return None
    try:
        s, k, n = name.split("_")
        return Config(topk=int(k[1:]), steps=int(s[1:]), draft_tokens=int(n[1:]))
    except (ValueError, IndexError):
        raise ValueError(f"not a configuration name: {name!r}") from None
