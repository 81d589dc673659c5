"""The timing state of one scheduler process: one `TimingState` object, read through a getter.

Modelled on nano-vllm's `utils/context.py`: a dataclass holds everything the timing hooks share
(the settings, whether this rank records, its recorder, window statistics and JSONL sink), a module
global holds the one instance, `get_timing_state()` returns it and `configure()` replaces it.
Readers (the hooks, the `marker` feature) never reach into module internals.

- `get_timing_state()`: a plain getter, nothing is created.
- `get_or_create_recorder(worker)`: the one place that creates things. On the EAGLE worker's first
  forward (the TP rank is known only then) it decides whether this rank records (TP rank 0 only
  unless `timing_all_ranks`), and if so builds the recorder and its sinks (statistics window, JSONL
  file, Prometheus, summary log line) and registers the atexit flush. Later calls return what was
  decided, so a non-recording rank pays one attribute check per cycle.
"""
from __future__ import annotations

import atexit
import dataclasses
import logging
import os

from sglang_patches.vocab.overlay_config import OverlayConfig
from sglang_patches.server.timing.recorder import CycleRecorder
from sglang_patches.vocab.stats import WindowStats, format_summary_line

logger = logging.getLogger("sglang_patches.server.timing")


@dataclasses.dataclass
class TimingState:
    config: OverlayConfig = dataclasses.field(default_factory=OverlayConfig)
    decided: bool = False                 # get_or_create_recorder ran once in this process
    rank: int | None = None               # TP rank of this process, once decided
    recorder: CycleRecorder | None = None  # None: not decided yet, or this rank does not record
    stats: WindowStats | None = None      # the percentile window behind /spec_timing (drafting cycles)
    by_steps: dict | None = None          # steps -> WindowStats of that steps value's decode cycles
    jsonl: object | None = None           # the JsonlSink, when --timing-log is set
    alarm: object | None = None           # the accept-collapse alarm sink (server/timing/accept_alarm.py)


_STATE = TimingState()


def get_timing_state() -> TimingState:
    return _STATE


def configure(config: OverlayConfig) -> TimingState:
    """Start a fresh state for `config` (called once per process when the overlay is applied)."""
    global _STATE
    _STATE = TimingState(config=config)
    return _STATE


def active() -> CycleRecorder | None:
    """The recorder of this process, or None (not created yet, or this rank does not record)."""
    return _STATE.recorder


def _worker_rank(worker) -> int:
    ps = getattr(worker, "ps", None)
    for obj in (ps, worker):
        rank = getattr(obj, "tp_rank", None)
        if isinstance(rank, int):
            return rank
    try:
        import torch.distributed as dist

        return dist.get_rank() if dist.is_initialized() else 0
    except Exception:  # noqa: BLE001
        return 0


def candidate_steps(worker) -> list[int]:
    """The steps values this worker can run: SGLang's adaptive candidates under
    `--speculative-adaptive` (it switches among them at runtime), else its one fixed value."""
    fixed = getattr(worker, "speculative_num_steps", None)
    values = {int(fixed)} if isinstance(fixed, int) else set()
    controller = getattr(worker, "adaptive_controller", None)
    candidates = getattr(controller, "candidate_steps", None) if controller is not None else None
    if isinstance(candidates, (list, tuple)):
        values |= {int(s) for s in candidates if isinstance(s, int)}
    return sorted(values)


class _StepsRouter:
    """Sink: each decode record into its steps value's window; the main window gets the cycles
    that drafted (a plain steps-0 cycle has no acceptance and would read as accept length 1)."""

    def __init__(self, stats: WindowStats, by_steps: dict, ring: int):
        self.stats, self.by_steps, self.ring = stats, by_steps, ring

    def __call__(self, rec: dict) -> None:
        if not rec.get("plain"):
            self.stats.add(rec)
        if rec["kind"] != "decode":
            return
        window = self.by_steps.get(rec["steps"])
        if window is None:  # a steps value outside the candidates: once, not per cycle
            window = self.by_steps[rec["steps"]] = WindowStats(ring=self.ring)
        window.add(rec)


class _SummaryLogger:
    def __init__(self, stats: WindowStats, every: int, rank: int):
        self.stats, self.every, self.rank, self.count = stats, every, rank, 0

    def __call__(self, rec: dict) -> None:
        if rec["kind"] != "decode" or rec.get("plain"):
            return
        self.count += 1
        if self.count % self.every == 0:
            logger.info("[tp%d] %s", self.rank, format_summary_line(self.stats.summary()))


def get_or_create_recorder(worker) -> CycleRecorder | None:
    """This process's recorder, created (with its sinks, files and atexit flush) on the first call;
    None if this rank does not record."""
    state = _STATE
    if state.decided:
        return state.recorder
    state.decided = True
    state.rank = rank = _worker_rank(worker)
    config = state.config
    if rank != 0 and not config.timing_all_ranks:
        return None
    import torch

    from sglang_patches.server.timing import accept_alarm

    # simulated acceptance, ours or SGLang's SGLANG_SIMULATE_ACC_LEN: every record, the Prometheus
    # label and the alarm say so (a log of simulated acceptance must never pass for real serving)
    simulated = accept_alarm.simulated_acceptance(config)
    stats = WindowStats(ring=config.timing_ring_size)
    steps_values = candidate_steps(worker)
    by_steps = {s: WindowStats(ring=config.timing_ring_size) for s in steps_values}
    sinks = [_StepsRouter(stats, by_steps, config.timing_ring_size)]
    if config.timing_log:
        from sglang_patches.server.timing.jsonl_sink import JsonlSink, rank_path

        path = rank_path(config.timing_log, rank, config.timing_all_ranks)
        state.jsonl = JsonlSink(path, max_bytes=int(config.timing_log_max_mb * 2**20),
                                backups=config.timing_log_backups, ring_size=config.timing_ring_size)
        sinks.append(state.jsonl)
        logger.info("sglang_patches: tp rank %d writes per-cycle timing to %s", rank, path)
    metrics = bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR") or getattr(worker.server_args, "enable_metrics", False))
    if metrics:
        try:
            from sglang_patches.server.timing.prometheus_sink import PrometheusSink

            sinks.append(PrometheusSink(rank, simulated=simulated, steps_values=steps_values))
        except ImportError:
            logger.warning("sglang_patches: prometheus_client missing; no timing metrics on /metrics")
        except ValueError as exc:  # metrics already registered in this process (configure() ran twice)
            logger.warning("sglang_patches: timing metrics not registered again (%s)", exc)
    if config.timing_summary_interval > 0:
        sinks.append(_SummaryLogger(stats, config.timing_summary_interval, rank))
    state.alarm = accept_alarm.build(config, rank, metrics, server_args=getattr(worker, "server_args", None))
    sinks.append(state.alarm)
    device = torch.cuda.current_device()

    def event_factory():
        return torch.cuda.Event(enable_timing=True)

    rec = CycleRecorder(event_factory, rank=rank, sinks=sinks, simulated=simulated)
    state.recorder, state.stats, state.by_steps = rec, stats, by_steps
    jsonl = state.jsonl

    def _shutdown():
        try:
            rec.flush(wait=lambda: torch.cuda.synchronize(device))
        finally:
            if jsonl is not None:
                jsonl.close()

    atexit.register(_shutdown)
    return rec


def snapshot() -> dict | None:
    """The live summary for /spec_timing and /server_info, or None when this rank does not record."""
    state = _STATE
    rec, stats = state.recorder, state.stats
    if rec is None:
        return None
    summary = stats.summary()
    summary["recorder"] = {"tp_rank": rec.rank, "emitted": rec.emitted,
                           "skipped_no_slot": rec.skipped_no_slot,
                           "dropped_incomplete": rec.dropped_incomplete,
                           # recorded steps / draft tokens vs the verify input of the same cycle
                           "shape_checked": rec.shape_checked, "shape_mismatch": rec.shape_mismatch,
                           "records_steps_match_fraction": (1 - rec.shape_mismatch / rec.shape_checked
                                                            if rec.shape_checked else None),
                           "jsonl": None if state.jsonl is None else state.jsonl.path}
    # per steps value (SGLang's --speculative-adaptive switches among them); "plain": steps 0,
    # no drafts: the server's own plain decode steps
    summary["by_steps"] = {str(s): {**w.summary(), "plain": s == 0}
                           for s, w in sorted((state.by_steps or {}).items()) if w.counted}
    alarm = state.alarm
    if alarm is not None:
        from sglang_patches.whatif.live_advice import summary_advice

        summary["accept_collapse"] = alarm.state()
        summary["advice"] = summary_advice(summary, alarm.config, check_command=alarm.check_command())
    return summary


def reset_stats() -> bool:
    """Empty the statistics window (POST /spec_timing/reset); False when nothing records here."""
    stats = _STATE.stats
    if stats is None:
        return False
    stats.reset()
    for window in (_STATE.by_steps or {}).values():
        window.reset()
    if _STATE.alarm is not None:
        _STATE.alarm.reset()
    return True
