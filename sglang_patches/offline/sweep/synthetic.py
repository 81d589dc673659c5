"""An analytic stand-in for SGLang at the process boundary (no GPU): tests and demos of the sweep.

`SyntheticGPU` knows a "true" EAGLE timing model and plays the server, `run_batch` and the
`/spec_timing` endpoint for `runner.run_configs(server_cls=, run_batch=, http=)`; configurations can be
told to fail (exit on start, never healthy, crash or time out at a batch size).

Truth (ms, per decode cycle at batch size bs):
    draft  = (0.3 + 0.5 s + 0.1 s (k - 1)) (1 + bs / 128)
    verify = 5 (1 + bs / 64) + 0.2 n (1 + bs / 4)
    extend = 0.4 + 0.02 n (1 + bs / 16);  host gap 0.3
    conditional acceptance r_j = 1 - (1 - R_j) ** (1 + 0.3 (k - 1)) at positions j < min(s, n - 1)
    tok/s = 0.97 bs accept_len / (cycle + host gap);  baseline tok/s = bs / (4.5 (1 + bs / 64) + 0.3) ms
(s steps, k topk, n draft tokens, R = BASE_RATES), times (1 + noise) with noise uniform in +-noise.
"""
from __future__ import annotations

import random

from sglang_patches.whatif.grid import Config, config_name
from sglang_patches.offline.sweep.server import ServerError

BASE_RATES = [0.8, 0.6, 0.5, 0.45, 0.4, 0.38, 0.36, 0.35, 0.34, 0.33]
HOST_GAP_MS = 0.3
STEADY_OVER_E2E = 1.25   # steady decode tok/s over end-to-end tok/s in the fake servers' logs


def cond_rates(c: Config) -> list[float]:
    positions = min(c.steps, c.draft_tokens - 1)
    return [1 - (1 - BASE_RATES[min(j, len(BASE_RATES) - 1)]) ** (1 + 0.3 * (c.topk - 1)) for j in range(positions)]


def pos_rates(c: Config) -> list[float]:
    out, p = [], 1.0
    for r in cond_rates(c):
        p *= r
        out.append(p)
    return out


def accept_length(c: Config) -> float:
    return 1.0 + sum(pos_rates(c))


def phases_ms(c: Config, bs: int) -> dict:
    s, k, n = c.steps, c.topk, c.draft_tokens
    return {"draft": (0.3 + 0.5 * s + 0.1 * s * (k - 1)) * (1 + bs / 128),
            "verify": 5 * (1 + bs / 64) + 0.2 * n * (1 + bs / 4),
            "extend": 0.4 + 0.02 * n * (1 + bs / 16)}


def true_tok_s(c: Config | None, bs: int) -> float:
    if c is None:
        return bs / ((4.5 * (1 + bs / 64) + HOST_GAP_MS) / 1000)
    cycle = sum(phases_ms(c, bs).values()) + HOST_GAP_MS
    return 0.97 * bs * accept_length(c) / (cycle / 1000)


def config_from_args(args: list[str]) -> Config | None:
    def val(flag):
        return int(args[args.index(flag) + 1]) if flag in args else None
    if "--speculative-num-steps" not in args:
        return None
    return Config(topk=val("--speculative-eagle-topk"), steps=val("--speculative-num-steps"),
                  draft_tokens=val("--speculative-num-draft-tokens"))


class SyntheticGPU:
    """failures: {config name: "exit" | "unhealthy" | "crash@BS" | "timeout@BS"}."""

    def __init__(self, noise: float = 0.01, seed: int = 0, failures: dict | None = None):
        self.noise, self.rng = noise, random.Random(seed)
        self.failures = dict(failures or {})
        self.started: list[str] = []          # config names, in start order
        self.alive: dict[str, bool] = {}
        self.last_bs: dict[str, int] = {}
        self.requests: list[tuple[str, int, int]] = []   # (config, bs, num_requests)
        self.offsets: list[tuple[str, int, int, bool]] = []  # (config, bs, prompt offset, ignore_eos)
        self.logs: dict[str, str] = {}        # config name -> its server's log path

    def _jitter(self, x: float) -> float:
        return x * (1 + self.rng.uniform(-self.noise, self.noise))

    # ---------------------------------------------------------------- process boundary fakes
    def server_cls(self, args, *, port, log_path, overlay=True, env=None, host="127.0.0.1"):
        return _FakeServer(self, list(args), log_path, env or {})

    def run_batch(self, url, prompts, batch_size, max_new_tokens, num_requests=None, timeout=600.0, *,
                  offset=0, ignore_eos=True):
        name = url.rsplit("/", 1)[1]
        cfg = None if name == "baseline" else Config(**_parse_name(name))
        mode = self.failures.get(name, "")
        if mode == f"crash@{batch_size}":
            self.alive[name] = False
            raise ConnectionResetError("connection reset by peer")
        if mode == f"timeout@{batch_size}":
            raise TimeoutError("timed out")
        n = num_requests or batch_size
        self.requests.append((name, batch_size, n))
        self.offsets.append((name, batch_size, offset, ignore_eos))
        self.last_bs[name] = batch_size
        tok_s = self._jitter(true_tok_s(cfg, batch_size))
        self._log_decode(name, cfg, batch_size)
        return {"batch_size": batch_size, "requests": n, "max_new_tokens": max_new_tokens,
                "wall_s": n * max_new_tokens / tok_s, "output_tokens": n * max_new_tokens, "tok_s": tok_s,
                "tok_s_per_request": tok_s / batch_size, "accept_length": None if cfg is None else accept_length(cfg),
                "verify_ct": 0}

    def _log_decode(self, name: str, cfg: Config | None, bs: int) -> None:
        """SGLang's scheduler lines for one batch, in 0.5.17's format: a prefill, then 'Decode batch'
        every 40 cycles at STEADY_OVER_E2E x the end-to-end rate (decode alone is faster than a
        request's whole life, which includes the prefill). A speculative window's accept len
        varies with its text (x0.7-1.5 here) and its tok/s with it, at one cycle time; a batch
        of more than one request ends in a slow tail at #running-req 1."""
        if name not in self.logs:
            return
        tput = STEADY_OVER_E2E * true_tok_s(cfg, bs)
        lines = [f"Prefill batch, #new-seq: {bs}, #new-token: {30 * bs}, #cached-token: 0, token usage: 0.00, "
                 f"#running-req: 0, #queue-req: 0, #pending-token: 0, cuda graph: False, input throughput (token/s): 9000.00"]
        for swing in (1.0, 0.7, 1.5, 0.8):   # mean 1.0: the windows' tokens average to the row's rate
            acc = "" if cfg is None else f"accept len: {swing * accept_length(cfg):.4f}, accept rate: 0.50, "
            rate = tput * (1.0 if cfg is None else swing)
            lines.append(f"Decode batch, #running-req: {bs}, #token: 900, token usage: 0.00, {acc}cuda graph: True, "
                         f"gen throughput (token/s): {self._jitter(rate):.4f}, #queue-req: 0")
        if bs > 1:   # the last request alone, at a quarter of its bs-1 rate: plausible, yet visibly off
            lines += [f"Decode batch, #running-req: 1, #token: 90, token usage: 0.00, cuda graph: True, "
                      f"gen throughput (token/s): {0.25 * STEADY_OVER_E2E * true_tok_s(cfg, 1):.4f}, "
                      "#queue-req: 0"] * 4
        with open(self.logs[name], "a") as fh:
            fh.write("".join(f"[2026-12-01 14:16:29] {line}\n" for line in lines))

    def http(self, url, payload=None, timeout=600.0, method=None):
        base, _, path = url.partition("/spec_timing")
        name = base.rsplit("/", 1)[1]
        if path == "/reset":
            return {"reset": True}
        cfg = Config(**_parse_name(name))
        ph = {p: self._jitter(v) for p, v in phases_ms(cfg, self.last_bs.get(name, 1)).items()}
        cycle = sum(ph.values())
        phases = {p: {"p50": v, "share": v / cycle} for p, v in ph.items()}
        phases["cycle"] = {"p50": cycle, "share": 1.0}
        phases["host_gap"] = {"p50": HOST_GAP_MS, "share": HOST_GAP_MS / cycle}
        return {"spec_timing": {"phases": phases, "accept_length": accept_length(cfg), "pos_rates": pos_rates(cfg),
                                "cycles": {"counted": 1000}}}

    # ---------------------------------------------------------------- recorded rows
    def row(self, c: Config | None, bs: int) -> dict:
        """A results.jsonl-shaped ok row as the runner writes it (with noise)."""
        tok = self._jitter(true_tok_s(c, bs))
        row = {"config": config_name(c), "spec": None if c is None else c.to_dict(), "batch_size": bs,
               "status": "ok", "tok_s": tok, "tok_s_repeats": [tok], "tok_s_per_request": tok / bs}
        if c is not None:
            self.last_bs[c.name] = bs
            st = self.http(f"http://fake/{c.name}/spec_timing")["spec_timing"]
            row.update(accept_length=st["accept_length"], pos_rates=st["pos_rates"],
                       phases_p50_ms={p: v["p50"] for p, v in st["phases"].items()},
                       phase_shares={p: v["share"] for p, v in st["phases"].items()})
        return row


def _parse_name(name: str) -> dict:
    s, k, n = name.split("_")
    return {"steps": int(s[1:]), "topk": int(k[1:]), "draft_tokens": int(n[1:])}


class _FakeServer:
    def __init__(self, world: SyntheticGPU, args, log_path, env):
        self.world, self.cmd, self.log_path, self.env = world, ["python", "-m", "sglang_patches.launch", *args], log_path, env
        self.name = config_name(config_from_args(args))
        self.url = f"http://fake/{self.name}"
        self.proc = None
        self.stopped = False

    def start(self):
        self.world.started.append(self.name)
        self.world.logs[self.name] = self.log_path
        self.world.alive[self.name] = True
        with open(self.log_path, "w") as fh:
            fh.write(f"fake server {self.name}\n")
        return self

    def wait_ready(self, timeout=300.0):
        mode = self.world.failures.get(self.name)
        if mode == "exit":
            self.world.alive[self.name] = False
            with open(self.log_path, "a") as fh:
                fh.write("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
            raise ServerError(f"server exited with code 1:\n{self.log_tail()}")
        if mode == "unhealthy":
            raise ServerError(f"server not healthy after {timeout:.0f} s:\n{self.log_tail()}")
        return self

    def poll(self):
        return None if self.world.alive.get(self.name, True) else 1

    def log_tail(self, n=40):
        with open(self.log_path) as fh:
            return "".join(fh.readlines()[-n:])

    def stop(self):
        self.stopped = True
        self.world.alive[self.name] = False
