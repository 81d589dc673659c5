"""The README's layout walk-through and version table agree with the code they describe."""
from __future__ import annotations

import re
from pathlib import Path

from sglang_patches import versions

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")


def _section(title: str) -> str:
    start = README.index(title)
    end = README.find("\n## ", start + 1)
    return README[start:] if end < 0 else README[start:end]


def test_draft_time_walkthrough_names_real_code():
    """Every `file` and `file` `function` the walk-through names exists, so a newcomer who follows it
    lands on the code that records and writes a cycle's draft time."""
    walk = _section("## Layout").split("**Where a cycle's draft time is recorded and written**")[1]
    timing = REPO / "sglang_patches" / "timing"
    named = {
        "hooks.py": ["forward_batch_generation", "_phase", "resolve_spec_v2_tokens"],
        "recorder.py": ["def begin", "def phase", "def drain", "def _emit", "def _span_ms", "EVENT_SLOTS",
                        '"draft"'],
        "runtime.py": ["def get_or_create_recorder", "class TimingState"],
        "schema.py": ["def make_record", "draft_ms"],
        "stats.py": ["class WindowStats", "def add"],
        "prometheus_sink.py": ["class PrometheusSink"],
        "jsonl_sink.py": ["def __call__", "def _flush_io_locked"],
    }
    for file, symbols in named.items():
        assert file in walk
        text = (timing / file).read_text(encoding="utf-8")
        for sym in symbols:
            assert sym in text, (file, sym)
    for word in ("get_or_create_recorder", "CycleRecorder.phase", "draft_start", "_span_ms(slot, \"draft\")",
                 "_flush_io_locked", "--timing-log"):
        assert word in walk, word
    paths = re.findall(r"`(sglang_patches/[\w/]+\.py|sglang_patches/[\w/]+/)`", _section("## Layout"))
    assert paths and all((REPO / p).exists() for p in paths), [p for p in paths if not (REPO / p).exists()]


def test_version_table_says_what_the_code_says():
    table = _section("### Where things stand")
    for v in versions.TESTED:
        assert re.search(rf"^\| {re.escape(v)} \| ran on the H200", table, re.M), v
    for v in versions.CPU_VERIFIED:
        assert re.search(rf"^\| {re.escape(v)} \| verified on CPU on its real classes", table, re.M), v
    assert versions.TESTED == ("0.5.17",) and versions.CPU_VERIFIED == ("0.5.23",)
    line = versions.support_line()
    assert line.startswith("sglang 0.5.17 ran on a GPU; 0.5.23 verified on CPU on its real classes "
                           "(the GPU machine's torch 2.11 fits only 0.5.17")
