"""Accept-collapse alarm: a timing sink that watches the rolling accept length of decode cycles.

A drafter that is wrong in a way preflight cannot see (trained for another target or chat
template, a precision it was not trained for, a quantization it silently inherits) accepts almost
nothing: accept length near 1, every cycle paying for drafts that are thrown away, slower than no
speculation, and stock SGLang says nothing. This sink keeps the last `window` decode cycles'
counts (tokens = accepted + 1 per request, the same convention as everywhere in the overlay) and,
once the window is full and its accept length is below the threshold, logs ONE loud WARNING with
the likely causes, sets `sglang_patches:spec_accept_collapse{tp_rank}` to 1 and reports itself in
`/spec_timing` (`accept_collapse`); with `--on-accept-collapse exit` it stops the server. It re-arms
once the rolling accept length is back at or above the threshold. Each steps value has its own
window (SGLang's `--speculative-adaptive` switches steps at runtime; see AcceptCollapseAlarm), and
plain steps-0 cycles are not counted.

Cost: it is a recorder sink, so it runs on the recorder's cold path (`drain()`), on counts the
recorder already holds on the host (no GPU access, no sync); O(batch size) per decode cycle, the
gauges touched only on a state change and once per window.

Silent (state `simulated`) when acceptance is simulated: `SGLANG_SIMULATE_ACC_LEN` in the
environment or the overlay's `simulate_acceptance`. Threshold: default 1.1 at steps >= 2 and off at
steps 1 (a one-draft chain's accept length is at most 2); an explicit threshold applies at every
steps value.
"""
from __future__ import annotations

import collections
import logging
import os

from sglang_patches.vocab.no_accept import check_note, preflight_command

logger = logging.getLogger("sglang_patches.server.timing")

DEFAULT_WINDOW = 256
DEFAULT_THRESHOLD = 1.1
ACTIONS = ("warn", "exit", "off")
SIMULATE_ENV = "SGLANG_SIMULATE_ACC_LEN"

CAUSES = (
    "likely causes: (1) the drafter was trained for another target model, tokenizer or chat template; "
    "(2) an EAGLE-3 drafter served as --speculative-algorithm EAGLE (preflight finds it); "
    "(3) the drafter runs at a precision or quantization it was not trained for (it inherits the target's "
    "--quantization unless --speculative-draft-model-quantization is set); (4) sampling far from the drafter's "
    "training (high temperature). Check: the drafter's model card (target, template), "
    "`{check}`{note}, the quantization flags, and `/spec_timing` pos_rates "
    "(position 0 near 0 means the first draft is already wrong). Until fixed, serving without speculation is faster")


def server_pair(server_args) -> dict:
    """What the preflight line needs from the server's ServerArgs (compat: SERVER_ARGS_MODEL_PATH,
    SERVER_ARGS_DRAFT_MODEL_PATH, SERVER_ARGS_ALGORITHM): read once, when the alarm is built."""
    return {"target": getattr(server_args, "model_path", None),
            "draft": getattr(server_args, "speculative_draft_model_path", None),
            "algorithm": getattr(server_args, "speculative_algorithm", None)}


def simulated_acceptance(config) -> bool:
    """True when acceptance is simulated (rates set at launch): SGLang's env var (> 0 turns its simulation on; its default is
    -1) or the overlay's simulate_acceptance."""
    from sglang_patches.server.simulate.checks import sglang_simulation_on
    return sglang_simulation_on(unparsable=False) or bool(getattr(config, "simulate_acceptance", None))


def stop_server(message: str) -> None:
    """Stop the whole server from inside a scheduler process.

    The scheduler process cannot simply raise: the alarm runs inside the recorder's sink loop, which
    catches sink exceptions so that timing can never break serving. Instead it signals the process
    running the HTTP server and tokenizer manager:
    - under the drop-in launcher or the plugin in SGLang's server CLI process (its pid in
      SGLANG_PATCHES_SERVER_PID, an ancestor of this process, which also reaches it past SGLang's
      data-parallel controller, the scheduler's parent at --dp-size > 1) with
      `deliberate_stop.STOP_SIGNAL`: that process kills the process tree at once and exits 3;
    - elsewhere (`Engine`, no published pid) the scheduler's parent with SIGQUIT, as SGLang's own
      `run_scheduler_process` does on an exception; SGLang answers it as a crash (stack and CUDA
      dumps, then a 60 s wait by default, then the process tree is killed).
    The message is logged at ERROR level first, so it is the last thing the server says.
    """
    import signal

    import psutil

    from sglang_patches.server.deliberate_stop import STOP_SIGNAL, launcher_ancestor

    logger.error("%s; stopping the server (--on-accept-collapse exit)", message)
    try:
        launcher = launcher_ancestor()  # only an ancestor counts (a stale or reused pid is ignored)
        target = launcher or psutil.Process().parent()
    except psutil.NoSuchProcess:  # an ancestor went away while we looked
        launcher = target = None
    if target is None:  # the launcher is gone: stop this process at least
        os.kill(os.getpid(), signal.SIGTERM)
        return
    target.send_signal(STOP_SIGNAL if launcher is not None else signal.SIGQUIT)


class _Window:
    """The rolling counts of one steps value's last `window` decode cycles."""

    __slots__ = ("ring", "tokens", "reqs", "collapsed")

    def __init__(self):
        self.ring = collections.deque()
        self.tokens = 0
        self.reqs = 0
        self.collapsed = False

    def rolling(self):
        return self.tokens / self.reqs if self.reqs else None


class AcceptCollapseAlarm:
    """Recorder sink; see the module docstring. `state()` is what /spec_timing shows.

    One window per steps value: under `--speculative-adaptive` SGLang switches the steps per batch
    size and by its acceptance EMA, and an accept length is only comparable within one chain
    length. A switch never mixes the cycles of two steps values in one window, so a window is
    judged only once it is full of its own steps' cycles. Plain cycles (steps 0, `plain` in the
    record) drafted nothing and are left out: there is no acceptance to judge. `collapsed` is
    true while any steps value's window is collapsed."""

    def __init__(self, *, window: int = DEFAULT_WINDOW, threshold: float | None = None, action: str = "warn",
                 simulated: bool = False, rank: int = 0, gauges=None, stop=stop_server, pair: dict | None = None):
        if window < 1:
            raise ValueError("window must be >= 1")
        if action not in ACTIONS:
            raise ValueError(f"action must be one of {ACTIONS}")
        self.window, self.threshold, self.action = int(window), threshold, action
        self.simulated, self.rank, self.gauges, self._stop = simulated, rank, gauges, stop
        self.pair = dict(pair or {})  # target / draft / algorithm paths the server was started with
        self.steps = None
        self.config = None
        self.fired = 0
        self.fired_at_cycle = None
        self.message = None
        self.reset()

    def reset(self) -> None:
        self._windows: dict[int, _Window] = {}
        self.cycles = 0
        self.plain_cycles = 0
        self._set_gauges(0, None)

    @property
    def collapsed(self) -> bool:
        return any(w.collapsed for w in self._windows.values())

    def _current(self):
        return self._windows.get(self.steps)

    def threshold_for(self, steps: int | None):
        if self.threshold is not None:
            return self.threshold
        return DEFAULT_THRESHOLD if steps is not None and steps >= 2 else None

    def rolling(self):
        w = self._current()
        return None if w is None else w.rolling()

    def __call__(self, rec: dict) -> None:
        if rec["kind"] != "decode":
            return
        acc = rec["accepted"]
        if not acc:
            return
        if rec.get("plain") or rec["steps"] == 0:
            self.plain_cycles += 1  # drafted nothing: no acceptance to judge
            return
        steps = rec["steps"]
        self.steps = steps
        self.config = (steps, rec["topk"], rec["draft_tokens"])  # also for /spec_timing's advice
        if self.action == "off":
            return
        w = self._windows.get(steps)
        if w is None:  # once per steps value (at most the adaptive candidates), not per cycle
            w = self._windows[steps] = _Window()
        n = len(acc)
        tokens = sum(acc) + n
        ring = w.ring
        if len(ring) == self.window:
            old_t, old_n = ring.popleft()
            w.tokens -= old_t
            w.reqs -= old_n
        ring.append((tokens, n))
        w.tokens += tokens
        w.reqs += n
        self.cycles += 1
        if rec.get("simulated"):
            self.simulated = True  # the recorder marks simulated cycles (--simulate-acceptance)
        if len(ring) < self.window or self.simulated:
            return
        thr = self.threshold_for(steps)
        if thr is None:
            return
        rolling = w.tokens / w.reqs
        if not w.collapsed and rolling < thr:
            w.collapsed = True
            self._fire(rolling, thr)
        elif w.collapsed and rolling >= thr:
            w.collapsed = False
            self._set_gauges(int(self.collapsed), rolling)
            logger.warning("sglang_patches: [tp%d] accept length recovered: %.2f over the last %d decode cycles "
                           "at steps %d (threshold %.2f)", self.rank, rolling, self.window, steps, thr)
        elif self.cycles % self.window == 0:
            self._set_gauges(int(self.collapsed), rolling)

    def check_command(self) -> str:
        """The preflight line for this server's pair and the configuration seen last (placeholders
        only where the server's paths are unknown)."""
        steps, topk, ndt = self.config or (None, None, None)
        return preflight_command(self.pair.get("target"), self.pair.get("draft"), self.pair.get("algorithm"),
                                 steps, topk, ndt)

    def _fire(self, rolling: float, thr: float) -> None:
        self.fired += 1
        self.fired_at_cycle = self.cycles
        steps, topk, ndt = self.config
        self.message = (f"sglang_patches: ACCEPT LENGTH COLLAPSE on tp rank {self.rank}: accept length {rolling:.3f} "
                        f"over the last {self.window} decode cycles at steps {steps}, at decode cycle {self.cycles} since start or "
                        f"reset (threshold {thr:.2f}; steps {steps}, topk {topk}, "
                        f"draft tokens {ndt}, up to {steps + 1} tokens per cycle possible): the drafts are almost never "
                        f"accepted and every cycle pays for them. {self._causes()}")
        self._set_gauges(1, rolling)
        if self.action == "exit":
            self._stop(self.message)
        else:
            logger.warning(self.message)

    def _causes(self) -> str:
        check = self.check_command()
        note = check_note(check)
        return CAUSES.format(check=check, note=f" ({note})" if note else "")

    def _set_gauges(self, collapsed: int, rolling) -> None:
        if self.gauges is None:
            return
        try:
            self.gauges.set(collapsed, rolling)
        except Exception:  # noqa: BLE001 - metrics must never break serving
            logger.exception("sglang_patches: accept-collapse gauges failed; disabling them")
            self.gauges = None

    def state(self) -> dict:
        thr = self.threshold_for(self.steps)
        w = self._current()
        if self.action == "off":
            status = "off"
        elif self.simulated:
            status = "simulated"
        elif thr is None and self.steps is not None:
            status = "off_at_steps_1"
        elif self.collapsed:
            status = "collapsed"
        elif w is None or len(w.ring) < self.window:
            status = "warming_up"
        else:
            status = "ok"
        by_steps = {str(s): {"rolling_accept_length": x.rolling(), "cycles_in_window": len(x.ring),
                             "collapsed": x.collapsed, "threshold": self.threshold_for(s)}
                    for s, x in sorted(self._windows.items())}
        return {"status": status, "collapsed": self.collapsed, "rolling_accept_length": self.rolling(),
                "window": self.window, "cycles_in_window": 0 if w is None else len(w.ring), "threshold": thr,
                "steps": self.steps, "by_steps": by_steps, "plain_cycles": self.plain_cycles,
                "action": self.action, "fired": self.fired, "fired_at_cycle": self.fired_at_cycle,
                "message": self.message if self.collapsed else None, "check": self.check_command()}


class AlarmGauges:
    """Prometheus gauges on SGLang's /metrics (multiprocess mode): collapsed 0/1 and the rolling
    accept length, per TP rank."""

    def __init__(self, rank: int):
        from prometheus_client import Gauge

        r = str(rank)
        self._collapsed = Gauge("sglang_patches:spec_accept_collapse",
                                "1 while the rolling accept length is below the collapse threshold",
                                ["tp_rank"], multiprocess_mode="mostrecent").labels(r)
        self._rolling = Gauge("sglang_patches:spec_rolling_accept_length",
                              "Accept length over the accept-collapse window (updated once per window)",
                              ["tp_rank"], multiprocess_mode="mostrecent").labels(r)

    def set(self, collapsed: int, rolling) -> None:
        self._collapsed.set(collapsed)
        if rolling is not None:
            self._rolling.set(rolling)


def build(config, rank: int, metrics: bool, server_args=None) -> AcceptCollapseAlarm:
    """The alarm of one scheduler process, from the overlay config (fields read with defaults, so an
    older serialized config works) and the server's ServerArgs (the pair its preflight line names)."""
    gauges = None
    if metrics:
        try:
            gauges = AlarmGauges(rank)
        except (ImportError, ValueError) as exc:  # no prometheus_client / registered twice
            logger.warning("sglang_patches: no accept-collapse gauges (%s)", exc)
    return AcceptCollapseAlarm(window=getattr(config, "accept_collapse_window", DEFAULT_WINDOW),
                               threshold=getattr(config, "accept_collapse_threshold", None),
                               action=getattr(config, "on_accept_collapse", "warn"),
                               simulated=simulated_acceptance(config), rank=rank, gauges=gauges,
                               pair=server_pair(server_args))
