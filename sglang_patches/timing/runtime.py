"""Per-process timing state inside a scheduler process: one recorder and its sinks.

Created lazily on the first forward of the EAGLE worker (the TP rank is known then). Only TP rank
0 records unless `timing_all_ranks` is set; other ranks then pay one attribute check per call.
"""
from __future__ import annotations

import atexit
import logging
import os

from sglang_patches.overlay_config import OverlayConfig
from sglang_patches.timing.recorder import CycleRecorder
from sglang_patches.timing.stats import WindowStats, format_summary_line

logger = logging.getLogger("sglang_patches.timing")

_config = OverlayConfig()
_state = {"recorder": None, "stats": None, "decided": False, "jsonl": None, "rank": None, "alarm": None}


def configure(config: OverlayConfig) -> None:
    global _config
    _config = config
    _state.update(recorder=None, stats=None, decided=False, jsonl=None, rank=None, alarm=None)


def active():
    """The recorder of this process, or None (not created yet, or this rank does not record)."""
    return _state["recorder"]


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


class _SummaryLogger:
    def __init__(self, stats: WindowStats, every: int, rank: int):
        self.stats, self.every, self.rank, self.count = stats, every, rank, 0

    def __call__(self, rec: dict) -> None:
        if rec["kind"] != "decode":
            return
        self.count += 1
        if self.count % self.every == 0:
            logger.info("[tp%d] %s", self.rank, format_summary_line(self.stats.summary()))


def recorder_for(worker):
    """Create (once) and return this process's recorder, or None if this rank does not record."""
    if _state["decided"]:
        return _state["recorder"]
    _state["decided"] = True
    rank = _worker_rank(worker)
    _state["rank"] = rank
    if rank != 0 and not _config.timing_all_ranks:
        return None
    import torch

    stats = WindowStats(ring=_config.timing_ring_size)
    sinks = [stats.add]
    if _config.timing_log:
        from sglang_patches.timing.jsonl_sink import JsonlSink, rank_path

        path = rank_path(_config.timing_log, rank, _config.timing_all_ranks)
        _state["jsonl"] = JsonlSink(path, max_bytes=int(_config.timing_log_max_mb * 2**20),
                                    backups=_config.timing_log_backups, ring_size=_config.timing_ring_size)
        sinks.append(_state["jsonl"])
        logger.info("sglang_patches: tp rank %d writes per-cycle timing to %s", rank, path)
    metrics = bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR") or getattr(worker.server_args, "enable_metrics", False))
    if metrics:
        try:
            from sglang_patches.timing.prometheus_sink import PrometheusSink

            sinks.append(PrometheusSink(rank, simulated=_config.simulate_acceptance is not None))
        except ImportError:
            logger.warning("sglang_patches: prometheus_client missing; no timing metrics on /metrics")
        except ValueError as exc:  # metrics already registered in this process (configure() ran twice)
            logger.warning("sglang_patches: timing metrics not registered again (%s)", exc)
    if _config.timing_summary_interval > 0:
        sinks.append(_SummaryLogger(stats, _config.timing_summary_interval, rank))
    from sglang_patches.timing import accept_alarm

    _state["alarm"] = accept_alarm.build(_config, rank, metrics)
    sinks.append(_state["alarm"])
    device = torch.cuda.current_device()

    def event_factory():
        return torch.cuda.Event(enable_timing=True)

    rec = CycleRecorder(event_factory, rank=rank, sinks=sinks, simulated=_config.simulate_acceptance is not None)
    _state.update(recorder=rec, stats=stats)

    def _shutdown():
        try:
            rec.flush(wait=lambda: torch.cuda.synchronize(device))
        finally:
            if _state["jsonl"] is not None:
                _state["jsonl"].close()

    atexit.register(_shutdown)
    return rec


def snapshot() -> dict | None:
    rec, stats = _state["recorder"], _state["stats"]
    if rec is None:
        return None
    summary = stats.summary()
    summary["recorder"] = {"tp_rank": rec.rank, "emitted": rec.emitted,
                           "skipped_no_slot": rec.skipped_no_slot,
                           "dropped_incomplete": rec.dropped_incomplete,
                           "jsonl": None if _state["jsonl"] is None else _state["jsonl"].path}
    alarm = _state["alarm"]
    if alarm is not None:
        from sglang_patches.timing.advisor import summary_advice

        summary["accept_collapse"] = alarm.state()
        summary["advice"] = summary_advice(summary, alarm.config)
    return summary


def reset() -> bool:
    stats = _state["stats"]
    if stats is None:
        return False
    stats.reset()
    if _state["alarm"] is not None:
        _state["alarm"].reset()
    return True
