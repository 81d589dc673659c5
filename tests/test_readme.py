"""The README and docs/ agree with the code they describe: the README stays a short newcomer's page
with the CI test command, its tour's preflight output is what preflight prints, every relative link
resolves, the design doc's cycle walk-through names real code, and the status doc's version table
says what the compat files say."""
from __future__ import annotations

import re
from pathlib import Path

from sglang_patches import versions

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
DOCS = REPO / "docs"
TOUR = (DOCS / "tour.md").read_text(encoding="utf-8")  # the README links it


def _section(text: str, title: str) -> str:
    start = text.index(title)
    end = text.find("\n## ", start + 1)
    return text[start:] if end < 0 else text[start:end]


def test_readme_is_a_short_page_with_the_ci_command():
    assert len(README) <= 7_000 and len(README.splitlines()) <= 90, (len(README), len(README.splitlines()))
    assert "(docs/tour.md)" in README
    assert "    bash tests/run_cpu.sh\n" in README  # .ci/run calls exactly this
    assert "bash tests/run_cpu.sh" in (REPO / ".ci" / "run").read_text()
    # the user's quick start names nothing a user's clone lacks
    assert ".gpu/" not in README and "../shared" not in README


def test_every_relative_link_resolves():
    pages = [REPO / "README.md", *sorted(DOCS.glob("*.md")), REPO / "benchmarks" / "results" / "README.md",
             REPO / "benchmarks" / "gpu_plans" / "README.md"]
    bad = []
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
            if "://" in target:
                continue
            path = target.split("#", 1)[0]
            if path and not (page.parent / path).exists():
                bad.append((page.relative_to(REPO).as_posix(), target))
    assert not bad, bad


def test_tour_preflight_output_is_what_preflight_prints(tmp_path, capsys, monkeypatch):
    """The tour's EAGLE/EAGLE3 refusal is the real output of the commands it shows."""
    from sglang_patches.offline.fixtures import build_fixture
    from sglang_patches.offline.preflight.cli import main

    start = TOUR.index("    $ sglang-patches preflight")
    end = TOUR.index("\n", TOUR.rindex("NOT compatible", start, TOUR.index("It exits 1", start)))  # the last line
    lines = [ln[4:] for ln in TOUR[start:end].split("\n")]
    n_cmd = next(i for i, ln in enumerate(lines) if not ln.endswith("\\")) + 1
    argv = " ".join(ln.rstrip("\\") for ln in lines[:n_cmd]).split()[3:]  # after "$ sglang-patches preflight"
    shown = [ln.rstrip() for ln in lines[n_cmd:]]
    build_fixture("llama3-8b", tmp_path / "l8b")
    monkeypatch.chdir(tmp_path)  # the tour shows relative paths
    rc = main(argv)
    out = [ln.rstrip() for ln in capsys.readouterr().out.splitlines()]
    assert rc == 1 and "It exits 1" in TOUR
    assert [ln for ln in shown if ln] == [ln for ln in out if ln], "\n".join(out)


def _tour_block(start_marker: str) -> tuple[list[str], list[str]]:
    """(argv after `sglang-patches`, the output lines shown) of the tour's code block starting at
    `start_marker`."""
    start = TOUR.index(start_marker)
    end = TOUR.find("\n\n", start)
    lines = [ln[4:] for ln in TOUR[start:end].split("\n")]
    argv = lines[0].split("#", 1)[0].split()[2:]
    return argv, [ln.rstrip() for ln in lines[1:] if ln.strip()]


def test_tour_report_and_advise_lines_are_what_they_print(tmp_path, capsys, monkeypatch):
    """The tour's report rows and advise rows are lines of what the two commands print on the log the
    tour describes (rebuilt from the recorded trained-8b grid row, as the tour says)."""
    import advisor_logs as al

    from sglang_patches.cli import main

    assert "`python tests/advisor_logs.py cycles.jsonl`" in TOUR and "steps-5 row at batch 1" in TOUR
    monkeypatch.chdir(tmp_path)
    assert al.main(["cycles.jsonl"]) == 0  # the tour's command
    assert al.main(["cycles.jsonl"]) == 2  # an existing file is left alone
    capsys.readouterr()
    monkeypatch.setenv("COLUMNS", "100")
    for marker in ("    $ sglang-patches report cycles.jsonl", "    $ sglang-patches advise cycles.jsonl"):
        argv, shown = _tour_block(marker)
        assert main(argv) == 0
        out = [ln.rstrip() for ln in capsys.readouterr().out.splitlines()]
        assert len(shown) >= 5 and all(ln in out for ln in shown), [ln for ln in shown if ln not in out]


def test_cycle_walkthrough_names_real_code():
    """Every `file` and `file` `function` the design doc's walk-through names exists, so a newcomer who
    follows it lands on the code that records and writes a cycle's draft time."""
    design = (DOCS / "design.md").read_text(encoding="utf-8")
    walk = _section(design, "## A cycle, from CUDA event to JSONL line")
    pkg = REPO / "sglang_patches"
    named = {
        "server/timing/hooks.py": ["forward_batch_generation", "_phase", "resolve_spec_v2_tokens"],
        "server/timing/recorder.py": ["def begin", "def phase", "def drain", "def _emit", "def _span_ms",
                                      "EVENT_SLOTS", '"draft"'],
        "server/timing/runtime.py": ["def get_or_create_recorder", "class TimingState"],
        "vocab/schema.py": ["def make_record", "draft_ms"],
        "vocab/stats.py": ["class WindowStats", "def add"],
        "server/timing/prometheus_sink.py": ["class PrometheusSink"],
        "server/timing/jsonl_sink.py": ["def __call__", "def _flush_io_locked"],
    }
    for file, symbols in named.items():
        assert file in walk, file
        text = (pkg / file).read_text(encoding="utf-8")
        for sym in symbols:
            assert sym in text, (file, sym)
    for word in ("get_or_create_recorder", "CycleRecorder.phase", "draft_start", "_span_ms(slot, \"draft\")",
                 "_flush_io_locked", "--timing-log"):
        assert word in walk, word
    paths = re.findall(r"`(sglang_patches/[\w/]+\.py|sglang_patches/[\w/]+/)`", design)
    paths += re.findall(r"`(sglang_patches/[\w/]+\.py|sglang_patches/[\w/]+/)`", README)
    assert paths and all((REPO / p).exists() for p in paths), [p for p in paths if not (REPO / p).exists()]


def test_version_table_says_what_the_code_says():
    """Each row's status cell is what `sglang-patches version` prints for that version (versions.status_of;
    tests/test_launcher_cli.py runs the command on the SGLang under test)."""
    table = _section((DOCS / "status.md").read_text(encoding="utf-8"), "## SGLang versions")
    rows = dict(re.findall(r"^\| ([\d.]+(?: - [\d.]+)?) \| ([^|]+) \|", table, re.M))
    assert versions.TESTED == ("0.5.17",) and versions.CPU_VERIFIED == ("0.5.23",)
    assert set(rows) == {"0.5.17", "0.5.23", "0.5.18 - 0.5.22"}, rows
    for v in ("0.5.17", "0.5.23", "0.5.18", "0.5.20", "0.5.22"):
        row = v if v in rows else "0.5.18 - 0.5.22"
        assert rows[row] == versions.status_of(v), (v, rows[row])
    assert rows["0.5.23"] == ("verified on CPU on its real classes; GPU: timing, checks, plugin, FP8 draft, "
                              "adaptive steps (started below the largest candidate, advise's config served), overhead, "
                              "profile, step_timing; not yet draft TP")
    line = versions.support_line()  # --help's sentence: short, and it sends the reader to the version command
    assert line.startswith("SGLang 0.5.17 to 0.5.23: 0.5.17 run on a GPU, 0.5.23 partly on a GPU (`sglang-patches "
                           "version` says what ran)") and len(line) <= 200, (len(line), line)


def test_status_is_a_scan_table():
    """docs/status.md: no table cell over 30 words (a link counts as its text), every figure row links
    its evidence (one results folder at most), the timing overhead is answered in one row there and in the README, and the FP8 draft
    phase stands beside its end-to-end figures."""
    status = (DOCS / "status.md").read_text(encoding="utf-8")
    long = []
    for line in status.splitlines():
        if not line.startswith("|") or line.startswith("|---"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        long += [c for c in cells if len(re.sub(r"\]\([^)]*\)", "]", c).split()) > 30]
        if len(cells) == 5 and cells[0] != "what":  # a figure row: its last cell is the evidence
            assert "](" in cells[4] or "not in this repository" in cells[4], line
            folders = set(re.findall(r"\]\(\.\./benchmarks/results/([^/)#]+)/", cells[4]))
            assert len(folders) <= 1, f"one results folder per status row: {sorted(folders)} in {cells[0]!r}"
    assert not long, long
    overhead = [ln for ln in status.splitlines() if ln.startswith("| Does the timing slow the server?")]
    assert len(overhead) == 1 and "overhead-256tok" in overhead[0] and "0.998" in overhead[0]
    said = [ln for ln in _section(README, "## What it does").splitlines() if "0.998" in ln]
    assert len(said) == 1 and "overhead" in said[0].lower(), said
    fp8 = _section(status, "## Drafter run differently")
    phase, e2e = fp8.index("bs 1 1.60x"), fp8.index("tok/s 1.037x c1")
    assert 0 < e2e - phase < 2_000  # side by side, not sections apart


def test_the_plugin_section_names_every_overlay_setting():
    """docs/design.md's plugin section lists SGLANG_PATCHES_CONFIG's keys: exactly OverlayConfig's fields."""
    import dataclasses
    import re

    from sglang_patches.vocab.overlay_config import OverlayConfig

    text = (REPO / "docs" / "design.md").read_text()
    section = text.split("## The plugin for plain SGLang", 1)[1].split("\n## ", 1)[0]
    keys = section.split("the launcher's flags with underscores:", 1)[1].split("An unknown key", 1)[0]
    named = {k for k in re.findall(r"`([a-z_]+)`", keys) if k not in ("all", "draft_tp", "triton_draft")}
    assert named == {f.name for f in dataclasses.fields(OverlayConfig)}
