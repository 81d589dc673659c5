"""Unit tests of `sglang_patches.profiling` on recorded inputs: scheduler titles, py-spy command
building and error classification, speedscope parsing, the flamegraph SVG and the summary."""
from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET

import pytest

from sglang_patches.profiling import flamegraph, pids, pyspy, speedscope
from sglang_patches.profiling import summary as summary_mod
from sglang_patches.vocab.stats import summarize


@pytest.mark.parametrize("title,ranks", [
    ("sglang::scheduler", {}),
    ("sglang::scheduler_TP3", {"TP": 3}),
    ("sglang::scheduler_DP1_TP2", {"DP": 1, "TP": 2}),
    ("sglang::scheduler_DP0_PP1_MOE_DP2_TP5_EP5", {"DP": 0, "PP": 1, "MOE_DP": 2, "TP": 5, "EP": 5}),
    ("sglang::scheduler_ATTN_CP1_TP0", {"ATTN_CP": 1, "TP": 0}),
    ("sglang::detokenizer", None),
    ("python -m sglang.launch_server --tp 2", None),
    ("sglang::schedulerX", None),
    ("", None),
])
def test_parse_title(title, ranks):
    # Titles as sglang/srt/managers/scheduler.py builds them: f"sglang::scheduler{prefix}" with
    # " DP0 PP1 ... TP3" turned into "_DP0_PP1_..._TP3".
    assert pids.parse_title(title) == ranks


def test_expected_schedulers():
    assert pids.expected_schedulers({"tp_size": 4, "dp_size": 2, "pp_size": 1}) == 8
    assert pids.expected_schedulers({"tp_size": 4, "dp_size": 2, "enable_dp_attention": True}) == 4
    assert pids.expected_schedulers({"tp_size": 2, "pp_size": 2}) == 4


def test_is_local_host():
    assert pids.is_local_host("127.0.0.1") and pids.is_local_host("localhost")
    assert not pids.is_local_host("192.0.2.1")  # TEST-NET-1, never assigned to a host


def test_build_command():
    cmd = pyspy.build_command("/x/py-spy", 1234, "/o/a.json", rate=250, duration_s=70, native=True)
    assert cmd == ["/x/py-spy", "record", "--pid", "1234", "--rate", "250", "--format", "speedscope",
                   "--output", "/o/a.json", "--duration", "70", "--native"]
    cmd = pyspy.build_command("py-spy", 7, "o.json")
    assert pyspy.display_command(pyspy.build_command("/x/py-spy", 1234, "/o/a.json")) == \
        "py-spy record --pid PID --rate 100 --format speedscope --output OUT/pyspy/scheduler-RANK-pidPID.speedscope.json"
    assert "--native" not in cmd and "--duration" not in cmd and cmd[cmd.index("--rate") + 1] == "100"


def test_classify_failure_messages():
    # stderr texts as py-spy 0.4.3 prints them (captured in this environment)
    denied = "Permission Denied: Try running again with elevated permissions by going 'sudo env \"PATH=$PATH\" !!'\n"
    msg = pyspy.classify_failure(denied, 42)
    assert "pid 42" in msg and "SYS_PTRACE" in msg and "ptrace_scope" in msg and "\n" not in msg
    gone = ("Error: Failed to get process executable name. Check that the process is running.\n\nCaused by:\n"
            "    0: No such file or directory (os error 2)\n\nStack backtrace:\n   0: <E as anyhow>\n")
    assert "gone" in pyspy.classify_failure(gone, 42)
    assert pyspy.classify_failure("py-spy> Sampling\nError: something odd\n", 5) == \
        "py-spy failed on pid 5: Error: something odd"


def test_find_py_spy_missing(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(Exception) as exc:
        pyspy.find_py_spy()
    assert "pip install py-spy" in str(exc.value) and getattr(exc.value, "code", None) == 2


def _speedscope():
    """A speedscope file as py-spy writes it: two threads; hot_spin is the leaf in 6 of 10 samples."""
    frames = [{"name": "<module>", "file": "/srv/app.py", "line": 9, "col": None},
              {"name": "event_loop", "file": "/v/lib/python3.11/site-packages/sglang/srt/managers/scheduler.py",
               "line": 100, "col": None},
              {"name": "hot_spin", "file": "/srv/app.py", "line": 4, "col": None},
              {"name": "hot_spin", "file": "/srv/app.py", "line": 5, "col": None},
              {"name": "recv", "file": "/srv/zmq.py", "line": 1, "col": None}]
    main = {"type": "sampled", "name": 'Thread 1 "MainThread"', "unit": "seconds", "startValue": 0,
            "endValue": 1, "samples": [[0, 1, 2]] * 4 + [[0, 1, 3]] * 2 + [[0, 1]] * 2,
            "weights": [0.01] * 8}
    other = {"type": "sampled", "name": 'Thread 2 "zmq"', "unit": "seconds", "startValue": 0, "endValue": 1,
             "samples": [[4], [4]], "weights": [0.01, 0.01]}
    return {"$schema": "https://www.speedscope.app/file-format-schema.json", "profiles": [main, other],
            "shared": {"frames": frames}, "activeProfileIndex": 0, "exporter": "py-spy@0.4.3", "name": "x"}


def test_top_functions_self_time():
    top = speedscope.top_functions(_speedscope(), n=10)
    assert [t["function"] for t in top] == ["hot_spin", "event_loop", "recv"]
    hot = top[0]
    assert hot["self_s"] == pytest.approx(0.06) and hot["self_share"] == pytest.approx(0.6)
    assert hot["line"] == 4 and hot["file"] == "app.py"           # the busiest line of the function
    assert top[1]["file"] == "sglang/srt/managers/scheduler.py"   # trimmed at site-packages
    assert top[1]["total_share"] == pytest.approx(0.8) and top[1]["self_share"] == pytest.approx(0.2)
    only_main = speedscope.top_functions(_speedscope(), thread_filter="MainThread")
    assert only_main[0]["self_share"] == pytest.approx(0.75) and "recv" not in [t["function"] for t in only_main]
    th = speedscope.threads(_speedscope())
    assert th[0]["name"].endswith('"MainThread"') and th[0]["seconds"] == pytest.approx(0.08)


def test_speedscope_load_rejects_other_json(tmp_path):
    p = tmp_path / "x.json"
    p.write_text(json.dumps({"traceEvents": []}))
    with pytest.raises(ValueError, match="not a speedscope"):
        speedscope.load(str(p))


def test_flamegraph_svg():
    svg = flamegraph.render(speedscope.stacks(_speedscope()), title="t")
    root = ET.fromstring(svg)  # well-formed XML
    ns = "{http://www.w3.org/2000/svg}"
    boxes = {g.find(f"{ns}title").text.split(" — ")[0]: float(g.find(f"{ns}rect").get("width"))
             for g in root.iter(f"{ns}g")}
    main = boxes['Thread 1 "MainThread"']
    assert boxes["all"] > main == boxes["event_loop (sglang/srt/managers/scheduler.py:100)"]
    assert main == pytest.approx(boxes["all"] * 0.8, rel=1e-3)
    assert boxes["hot_spin (app.py:4)"] == pytest.approx(boxes["all"] * 0.4, rel=1e-3)


def _timing_summary():
    """A timer summary (WindowStats) of 100 decode cycles of 10 ms, host gap 1 ms, GPU gap 0.5 ms."""
    recs = [{"v": 1, "cycle": i, "t": 1000.0 + 0.0115 * i, "rank": 0, "kind": "decode", "bs": 4, "steps": 3,
             "topk": 1, "draft_tokens": 4, "accepted": [2, 1, 3, 0], "draft_ms": 3.0, "verify_ms": 5.0,
             "extend_ms": 2.0, "cycle_ms": 10.0, "host_gap_ms": 1.0, "gpu_gap_ms": 0.5, "stale": False}
            for i in range(100)]
    s = summarize(recs)
    s["recorder"] = {"tp_rank": 0, "emitted": 100}
    return s


def test_summary_from_recorded_inputs(tmp_path):
    out = str(tmp_path)
    timing = {"spec_timing": _timing_summary(), "dp": [{"dp_rank": 0, "overlay": True, "spec_timing": _timing_summary()}]}
    schedulers = [{"pid": 11, "tp_rank": 0, "dp_rank": None, "label": "tp0", "title": "sglang::scheduler_TP0",
                   "rank_from": "title", "sources": ["scan", "marker"]},
                  {"pid": 12, "tp_rank": 1, "dp_rank": None, "label": "tp1", "title": "sglang::scheduler_TP1",
                   "rank_from": "title", "sources": ["scan"]}]
    data = _speedscope()
    pys = {11: {"ok": True, "message": "", "speedscope": f"{out}/pyspy/a.speedscope.json", "svg": f"{out}/pyspy/a.svg",
                "threads": speedscope.threads(data), "top": speedscope.top_functions(data)},
           12: {"ok": False, "message": "py-spy was denied access to pid 12 (ptrace): ..."}}
    torch = {"requested": True, "started": True, "stopped": True, "output_dir": f"{out}/torch", "message": None,
             "files": [f"{out}/torch/p-TP-0.trace.json.gz", f"{out}/torch/p-TP-1.trace.json.gz"]}
    meta = {"url": "http://h:1", "sglang_version": "0.5.17", "overlay_version": "0.1.0", "seconds": 2.0,
            "interrupted": False, "window": {"start": 1000.0, "end": 1002.0, "wall_s": 2.0}}
    s = summary_mod.build(meta=meta, schedulers=schedulers, pyspy=pys, timing=timing,
                          markers=[{"dp_index": 0, "pid": 11, "tp_rank": 0}], torch=torch,
                          problems=[pys[12]["message"]], notes=[])
    r0, r1 = s["ranks"]
    assert r0["timing"]["host_gap_share"] == pytest.approx(0.1) and r0["timing"]["gpu_gap_share"] == pytest.approx(0.05)
    assert r0["timing"]["cycle_sum_s"] == pytest.approx(1.0) and r0["timing"]["gpu_busy_share"] == pytest.approx(0.5)
    assert r1["timing"] is None  # only the reporting rank has a timer window
    assert r0["chrome_traces"] == [torch["files"][0]] and r1["chrome_traces"] == [torch["files"][1]]
    assert s["complete"] is False
    js, md = summary_mod.write(s, out)
    assert json.load(open(js))["ranks"][0]["pid"] == 11
    text = open(md).read()
    assert "**PARTIAL**" in text and "denied access to pid 12" in text
    assert "| tp0 | 11 | 10.0% | 5.0% | 50.0% | 100 |" in text
    assert "[svg](pyspy/a.svg)" in text and "(torch/p-TP-1.trace.json.gz)" in text
    assert "| 1 | `hot_spin` | app.py:4 | 0.060 | 60.0% | 60.0% |" in text
    s2 = summary_mod.build(meta={**meta, "overlay_version": None}, schedulers=schedulers[:1], pyspy={}, timing=None,
                           markers=[], torch={"requested": False}, problems=[], notes=["no overlay"])
    assert s2["complete"] and "no overlay: no phase-timing window" in summary_mod.render_markdown(s2, out)
    assert os.path.basename(js) == "summary.json"
