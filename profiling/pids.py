"""Find the scheduler processes (one per TP rank) of an SGLang server running on this host.

Sources, combined:
  * the overlay marker: `/server_info` -> internal_states[i].sglang_patches.pid (the reporting rank
    of each DP group; only meaningful when the server runs on this host);
  * a psutil scan for SGLang's process titles: `sglang::scheduler[_DP<d>][_PP<p>][_TP<t>][_EP<e>]`
    (set with setproctitle in sglang/srt/managers/scheduler.py; the TP part only when tp_size > 1),
    kept to the process tree of the server that listens on the URL's port when that is known.
"""
from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import asdict, dataclass, field

import psutil

TITLE_PREFIX = "sglang::scheduler"
_RANK_RE = re.compile(r"_(ATTN_CP|MOE_DP|DP|PP|TP|EP)(\d+)")


@dataclass
class Scheduler:
    pid: int
    title: str | None = None
    tp_rank: int | None = None
    dp_rank: int | None = None
    rank_from: str = "unknown"  # "title", "title (tp_size 1)", "overlay marker", "unknown"
    sources: list[str] = field(default_factory=list)  # "marker", "scan"

    @property
    def label(self) -> str:
        tp = "tp?" if self.tp_rank is None else f"tp{self.tp_rank}"
        return (f"dp{self.dp_rank}-" if self.dp_rank is not None else "") + tp

    def to_dict(self) -> dict:
        return {**asdict(self), "label": self.label}


def parse_title(cmdline: str) -> dict | None:
    """Ranks named in a scheduler title, e.g. 'sglang::scheduler_DP0_TP1' -> {'DP': 0, 'TP': 1};
    {} for a bare 'sglang::scheduler'; None if it is not a scheduler title."""
    cmdline = (cmdline or "").strip()
    if not cmdline.startswith(TITLE_PREFIX):
        return None
    suffix = cmdline[len(TITLE_PREFIX):].split()[0] if cmdline[len(TITLE_PREFIX):].strip() else ""
    if suffix and not suffix.startswith("_"):
        return None  # e.g. sglang::scheduler_foo is fine, sglang::schedulerX is not ours
    return {k: int(v) for k, v in _RANK_RE.findall(suffix)}


def _cmdline(proc: psutil.Process) -> str:
    try:
        return " ".join(proc.cmdline()).strip()  # setproctitle pads the title with spaces
    except (psutil.Error, OSError):
        return ""


def is_local_host(host: str) -> bool:
    """True if `host` (from the URL) names this machine."""
    if host in ("localhost", socket.gethostname(), socket.getfqdn()):
        return True
    try:
        addrs = {ai[4][0] for ai in socket.getaddrinfo(host, None)}
    except OSError:
        return False
    local = {"0.0.0.0", "::"}
    for entries in psutil.net_if_addrs().values():
        local.update(e.address.split("%")[0] for e in entries)
    for a in addrs:
        try:
            if ipaddress.ip_address(a.split("%")[0]).is_loopback or a in local:
                return True
        except ValueError:
            continue
    return False


def listener_pid(port: int) -> int | None:
    """The pid listening on TCP `port` here, or None (unknown, e.g. no permission to see it)."""
    try:
        conns = psutil.net_connections(kind="tcp")
    except (psutil.Error, OSError):
        return None
    pids = {c.pid for c in conns if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port and c.pid}
    return pids.pop() if len(pids) == 1 else None


def scan_schedulers() -> list[tuple[psutil.Process, dict]]:
    found = []
    for proc in psutil.process_iter():
        ranks = parse_title(_cmdline(proc))
        if ranks is not None:
            found.append((proc, ranks))
    return found


def _ancestors(proc: psutil.Process) -> list[int]:
    try:
        return [p.pid for p in proc.parents()]
    except (psutil.Error, OSError):
        return []


def _launcher(proc: psutil.Process) -> int | None:
    """Nearest ancestor that is neither a scheduler nor SGLang's DP controller: the server process."""
    try:
        for parent in proc.parents():
            if not _cmdline(parent).startswith(("sglang::scheduler", "sglang::data_parallel_controller")):
                return parent.pid
    except (psutil.Error, OSError):
        pass
    return None


def expected_schedulers(server_info: dict) -> int:
    tp, pp = int(server_info.get("tp_size") or 1), int(server_info.get("pp_size") or 1)
    dp = 1 if server_info.get("enable_dp_attention") else int(server_info.get("dp_size") or 1)
    return tp * pp * dp


def discover(host: str, port: int, server_info: dict, markers: list[dict]) -> tuple[list[Scheduler], list[str]]:
    """(schedulers, notes): the scheduler processes of the server at host:port on this host."""
    notes: list[str] = []
    if not is_local_host(host):
        notes.append(f"the server ({host}) is not on this host: py-spy can only attach to local processes; "
                     "run `sglang-patches profile` on the server's host for host-side profiles")
        return [], notes
    tp_size = server_info.get("tp_size")
    scanned = scan_schedulers()
    root = listener_pid(port)
    marker_pids = {m["pid"] for m in markers if isinstance(m.get("pid"), int)}
    if root is not None:
        scanned = [(p, r) for p, r in scanned if root in _ancestors(p) or p.pid == root]
    else:
        groups: dict[int | None, list] = {}
        for p, r in scanned:
            groups.setdefault(_launcher(p), []).append((p, r))
        chosen = [g for g in groups.values() if any(p.pid in marker_pids for p, _ in g)]
        if chosen:
            scanned = [x for g in chosen for x in g]
        elif len(groups) > 1:
            notes.append(f"could not tell which process listens on port {port} and found {len(groups)} "
                         "SGLang servers' schedulers on this host: profiling all of them")
    by_pid: dict[int, Scheduler] = {}
    for proc, ranks in scanned:
        s = Scheduler(pid=proc.pid, title=_cmdline(proc), sources=["scan"], dp_rank=ranks.get("DP"))
        if "TP" in ranks:
            s.tp_rank, s.rank_from = ranks["TP"], "title"
        elif tp_size == 1:
            s.tp_rank, s.rank_from = 0, "title (tp_size 1)"
        by_pid[proc.pid] = s
    for m in markers:
        pid = m.get("pid")
        if not isinstance(pid, int):
            continue
        if pid in by_pid:
            s = by_pid[pid]
            s.sources.append("marker")
        elif psutil.pid_exists(pid) and "sglang" in _cmdline(psutil.Process(pid)):
            s = by_pid[pid] = Scheduler(pid=pid, title=_cmdline(psutil.Process(pid)), sources=["marker"])
        else:
            notes.append(f"overlay marker pid {pid} is not a local SGLang process (server in a container "
                         "or another pid namespace?); using the process-title scan only")
            continue
        if s.tp_rank is None and isinstance(m.get("tp_rank"), int):
            s.tp_rank, s.rank_from = m["tp_rank"], "overlay marker"
        if s.dp_rank is None and server_info.get("dp_size", 1) not in (None, 1):
            s.dp_rank = m.get("dp_index")
    out = sorted(by_pid.values(), key=lambda s: (s.dp_rank or 0, 1e9 if s.tp_rank is None else s.tp_rank, s.pid))
    if isinstance(tp_size, int) and out:
        expected = expected_schedulers(server_info)
        if len(out) < expected:
            notes.append(f"found {len(out)} scheduler process(es) but expected {expected} from tp/pp/dp sizes "
                         "(multi-node server? only this host's ranks are profiled)")
    if not out:
        notes.append(f"no SGLang scheduler process (title {TITLE_PREFIX}*) found on this host for port {port}")
    return out, notes
