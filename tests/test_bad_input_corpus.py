"""Run the bad-input corpus (the cases of tests/bad_input_cli.py, bad_input_sweep.py and
bad_input_launch.py, built with tests/bad_input_corpus.py): every case must end with its exit code,
exactly one error line naming the problem (warnings aside), no traceback, within a time limit,
and with its directory unchanged (inputs byte-identical, no output created or half-written).

In-process runs call the real entry points (`sglang_patches.cli.main`, `sglang_patches.launch.main`,
`sglang_patches.plugin.load`); an exception other than SystemExit escaping them is what a user
would see as a traceback, so it fails the case. A few launcher cases run as real subprocesses.
"""
from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import bad_input_cli
import bad_input_launch
import bad_input_sweep
from bad_input_corpus import Case, log, rec

CASES = [*bad_input_cli.CASES, *bad_input_sweep.CASES, *bad_input_launch.CASES]
CASE_SECONDS = 30
REPO = Path(__file__).resolve().parents[1]


def snapshot(root: Path) -> dict[str, str]:
    """relative path -> sha256 of every file (symlinks by target), 'dir' for directories."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames:
            out[os.path.relpath(os.path.join(dirpath, n), root)] = "dir"
        for n in filenames:
            p = os.path.join(dirpath, n)
            rel = os.path.relpath(p, root)
            if os.path.islink(p):
                out[rel] = "link:" + os.readlink(p)
            elif not os.path.isfile(p):  # a FIFO or device: never read
                out[rel] = "special"
            else:
                with open(p, "rb") as fh:
                    out[rel] = hashlib.sha256(fh.read()).hexdigest()
    return out


def _fill(argv: list[str], d: Path) -> list[str]:
    return [a.replace("{d}", str(d)) for a in argv]


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout(f"no answer within {CASE_SECONDS} s (a hang)")


def _cuda_visible() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:  # noqa: BLE001
        return False


def run_in_process(c: Case, argv: list[str], capfd) -> tuple[int, str, str]:
    if c.runner == "cli":
        from sglang_patches.cli import main

        call = lambda: main(argv)  # noqa: E731
    elif c.runner == "launch":
        from sglang_patches import launch

        call = lambda: launch.main(argv)  # noqa: E731
    else:  # plugin: what SGLang's load_plugins() runs in every process
        from sglang_patches import plugin

        os.environ["SGLANG_PATCHES_ENABLE"] = "1"
        os.environ["SGLANG_PATCHES_CONFIG"] = argv[0]
        call = plugin.load
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(CASE_SECONDS)
    try:
        code = call()
    except SystemExit as exc:
        code = exc.code
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    out, err = capfd.readouterr()
    return code, out, err


def run_subprocess(argv: list[str], d: Path, env: dict) -> tuple[int, str, str]:
    proc = subprocess.run([sys.executable, "-m", "sglang_patches.launch", *argv], cwd=d, env=env,
                          capture_output=True, text=True, timeout=CASE_SECONDS * 2)
    return proc.returncode, proc.stdout, proc.stderr


def test_corpus_size_and_coverage():
    assert len(CASES) >= 150, len(CASES)
    assert len({c.name for c in CASES}) == len(CASES), "case names must be unique"
    subcommands = {c.argv[0] for c in CASES if c.runner == "cli"}
    assert {"version", "patches", "preflight", "report", "fixtures", "sweep", "profile", "advise"} <= subcommands
    assert {c.runner for c in CASES} == {"cli", "launch", "launch-subprocess", "plugin"}


@pytest.mark.parametrize("c", CASES, ids=[c.name for c in CASES])
def test_bad_input(c: Case, tmp_path, monkeypatch, capfd):
    if "no CUDA GPU" in c.expect and _cuda_visible():
        pytest.skip("a GPU is visible: the launcher would start a real server")
    d = tmp_path / "case"
    d.mkdir()
    monkeypatch.chdir(d)
    monkeypatch.setenv("SGLANG_PATCHES_CACHE", str(tmp_path / "cache"))  # never the user's cache
    for key, value in c.env.items():
        monkeypatch.setenv(key, value.replace("{d}", str(d)))
    monkeypatch.delenv("SGLANG_PATCHES_ENABLE", raising=False)
    monkeypatch.delenv("SGLANG_PATCHES_CONFIG", raising=False)
    if c.setup:
        c.setup(d)
    argv = _fill(c.argv, d)
    before = snapshot(tmp_path)
    capfd.readouterr()
    if c.runner == "launch-subprocess":
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        code, out, err = run_subprocess(argv, d, env)
    else:
        code, out, err = run_in_process(c, argv, capfd)
    text = out + err
    assert "Traceback" not in text, text[-3000:]
    assert code == c.code, f"exit {code!r}, expected {c.code}; output:\n{text[-2000:]}"
    if c.code == 2:
        lines = [ln for ln in err.splitlines() if ln.strip() and "warning:" not in ln]
        assert len(lines) == 1, f"expected exactly one error line, got:\n{err[-2000:]}"
        assert "error:" in lines[0], lines[0]
        assert c.expect.lower() in lines[0].lower(), f"{c.expect!r} not in {lines[0]!r}"
    else:  # findings: named in the output, no error line
        assert c.expect.lower() in text.lower(), text[-2000:]
    assert snapshot(tmp_path) == before, "an input changed or an output was (half-)written"


# ---------------------------------------------------------------- what the corpus cannot show


def test_report_skips_bad_lines_with_file_line_warnings_and_json_stays_valid(tmp_path, capfd):
    from sglang_patches.cli import main

    bad = [json.dumps(rec(bs=-1)), json.dumps(rec(draft_ms=1.0)).replace("1.0", "NaN", 1),
           json.dumps(rec(accepted=[10 ** 9])), json.dumps(rec(gpu_gap_ms="x"))]
    log(tmp_path, rec(), *bad, rec(cycle=1, t=1764400001.0))
    assert main(["report", str(tmp_path / "log.jsonl"), "--json"]) == 0
    out, err = capfd.readouterr()

    def refuse(name):
        raise AssertionError(f"{name} in --json output")

    result = json.loads(out, parse_constant=refuse)
    assert result["skipped_lines"] == 4 and result["ranks"]["0"]["cycles"]["decode"] == 2
    for lineno in (2, 3, 4, 5):
        assert f"log.jsonl:{lineno}: skipped" in err
    assert result["ranks"]["0"]["tok_s_batch"] > 0


@pytest.mark.parametrize("stamp", ["[]", '"x"', "null", '{"complete": "yes", "name": "tiny"}',
                                   '{"complete": true, "name": ["tiny"]}', "[" * 100_000])
def test_corrupt_fixture_stamp_is_an_incomplete_fixture(tmp_path, stamp):
    from sglang_patches.offline.fixtures import load_fixture

    (tmp_path / "fixture.json").write_text(stamp)
    assert load_fixture(tmp_path) is None  # rebuilt by ensure_fixture, not an AttributeError


def test_replay_onto_its_own_grid_keeps_every_file(tmp_path, capfd):
    """The issue's data-loss case, with the files a real grid holds."""
    from bad_input_corpus import GOOD_ROWS, sweep_dir

    from sglang_patches.cli import main

    sweep_dir(tmp_path, "g", GOOD_ROWS, plan={"configs": ["baseline"]}, search={"design": []})
    (tmp_path / "g" / "timing").mkdir()
    (tmp_path / "g" / "timing" / "baseline.jsonl").write_text("{}\n")
    before = snapshot(tmp_path)
    with pytest.raises(SystemExit) as info:
        main(["sweep", "--search", "--replay", str(tmp_path / "g"), "--out", str(tmp_path / "g"), "--force"])
    assert info.value.code == 2 and snapshot(tmp_path) == before
    assert "is also the input --replay" in capfd.readouterr().err


def test_atomic_output_leaves_the_old_file_or_the_new_one_never_a_half(tmp_path):
    from sglang_patches.cliargs import atomic_output

    target = tmp_path / "out.png"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError):
        with atomic_output(target) as tmp:
            Path(tmp).write_bytes(b"half")
            raise RuntimeError("disk full")
    assert target.read_bytes() == b"old" and sorted(p.name for p in tmp_path.iterdir()) == ["out.png"]
    with atomic_output(target) as tmp:
        Path(tmp).write_bytes(b"new")
    assert target.read_bytes() == b"new" and sorted(p.name for p in tmp_path.iterdir()) == ["out.png"]
