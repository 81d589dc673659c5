"""Every benchmark entry point: `--help` names its figure and duration; `--dry-run` prints a plan, starts
nothing, writes nothing, and never initialises CUDA. Each script runs in its own process through runpy; the
process then reports whether torch.cuda was initialised (torch is imported only if the script imported it)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"

# script -> the minimal arguments besides --dry-run ({out} is the folder that must stay empty)
ENTRY_POINTS = {
    "adaptive_bench.py": ["--out", "{out}"],
    "adaptive_cycles.py": ["{out}"],
    "adaptive_graphs_check.py": ["--out", "{out}"],
    "adaptive_sets_sim.py": ["--out", "{out}/summary.json"],
    "adaptive_spread.py": ["{out}", "{out}"],
    "adaptive_steps0.py": ["--run", "{out}", "--out", "{out}/summary.json"],
    "advisor_check.py": ["--out", "{out}"],
    "bench_draft_kernels.py": ["--out", "{out}/kernels.json"],
    "draft_backend_check.py": ["--out", "{out}"],
    "draft_tp_bench.py": ["--out", "{out}", "--tp", "2"],
    "draft_tp_x2.py": ["--out", "{out}"],
    "fp8_draft_bench.py": ["--out", "{out}"],
    "fp8_draft_summary.py": ["{out}", "--out", "{out}/summary.json"],
    "fp8_path_sweep.py": ["{out}/path_sweep.json"],
    "moe_expert_spread.py": ["--out", "{out}"],
    "moe_steps_sweep.py": ["--dry-run", "sweep", "--profile", "weak", "--out", "{out}"],
    "run_parallel.py": ["--out", "{out}", "--job", "a|0|python -c pass"],
    "search_vs_grid.py": ["--search", "{out}", "--grid", "{out}"],
    "serve_checks.py": ["--out", "{out}"],
    "single_request_check.py": ["--out", "{out}"],
    "timing_overhead.py": ["--out", "{out}"],
    "trained_8b_check.py": ["--out", "{out}"],
    "trained_pair_demo.py": ["--out", "{out}"],
    "verify_cost.py": ["--out", "{out}"],
}

RUNNER = """
import json, runpy, sys
script, argv = sys.argv[1], sys.argv[2:]
sys.argv = [script, *argv]
sys.path.insert(0, str(__import__("pathlib").Path(script).parent))
code = 0
try:
    runpy.run_path(script, run_name="__main__")
except SystemExit as exc:
    code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
torch = sys.modules.get("torch")
cuda = bool(torch is not None and torch.cuda.is_initialized())
print("\\n@@" + json.dumps({"code": code, "cuda_initialised": cuda}))
"""


def _run(script: str, argv: list[str]) -> tuple[dict, str, str]:
    proc = subprocess.run([sys.executable, "-c", RUNNER, str(BENCH / script), *argv],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    head, _, tail = proc.stdout.rpartition("\n@@")
    assert tail, f"{script}: the runner did not finish\n{proc.stderr[-2000:]}"
    return json.loads(tail), head, proc.stderr


@pytest.mark.parametrize("script", sorted(ENTRY_POINTS))
def test_dry_run_prints_the_plan_and_starts_nothing(script, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    argv = [a.replace("{out}", str(out)) for a in ENTRY_POINTS[script]]
    res, stdout, stderr = _run(script, [*argv, "--dry-run"] if "--dry-run" not in argv else argv)
    assert res["code"] == 0, f"{script}: exit {res['code']}\n{stderr[-2000:]}"
    lines = stdout.strip().splitlines()
    assert lines and lines[0] == "dry run: nothing started, nothing written", stdout[:500]
    assert len(lines) >= 3, f"{script}: an empty plan\n{stdout}"
    assert not res["cuda_initialised"], f"{script}: --dry-run initialised CUDA"
    assert list(out.iterdir()) == [], f"{script}: --dry-run wrote {sorted(p.name for p in out.iterdir())}"
    assert not list(tmp_path.rglob("*.log")), f"{script}: a server log appeared"


@pytest.mark.parametrize("script", sorted(ENTRY_POINTS))
def test_help_names_the_figure_and_its_time(script):
    res, stdout, stderr = _run(script, ["--help"])
    assert res["code"] == 0, stderr[-2000:]
    text = " ".join(stdout.split())
    assert "Makes:" in text and "benchmarks/results/" in text, text[-600:]
    assert "Time on one GPU:" in text and "--dry-run" in text, text[-600:]
    assert not res["cuda_initialised"]
