"""Hook targets resolve statically (AST, no import) in sglang 0.5.23 and agree with the real
import-based resolution in the installed 0.5.17."""
import os
import shutil
import subprocess
import sys

import pytest

from sglang_patches.hooks import REGISTRY
from sglang_patches.overlay_config import FEATURES
from sglang_patches.patches.catalog import specs_for
from sglang_patches.static_targets import check_all, check_spec, sglang_version_at

SITE_0523 = os.environ.get("SGP_SGLANG_0523_SITE", os.path.join(os.path.dirname(__file__), "..", ".venv-test", "sglang-0523"))


def _site_0517():
    import sglang

    return os.path.dirname(os.path.dirname(sglang.__file__))


@pytest.fixture(scope="module")
def site_0523():
    if not os.path.isdir(os.path.join(SITE_0523, "sglang")):
        if os.environ.get("CI"):
            pytest.fail(f"sglang 0.5.23 sources missing at {SITE_0523}; tests/run_cpu.sh installs them")
        pytest.skip(f"sglang 0.5.23 sources not at {SITE_0523} (run tests/run_cpu.sh)")
    return SITE_0523


def test_every_target_resolves_in_0523(site_0523):
    assert sglang_version_at(site_0523) == "0.5.23"
    results = check_all(site_0523, specs_for(FEATURES))
    assert len(results) == 11
    bad = [r for r in results if not r.ok]
    assert not bad, bad


def test_static_agrees_with_import_in_0517():
    specs = specs_for(FEATURES)
    REGISTRY.validate(specs)  # real import + signature check
    results = check_all(_site_0517(), specs)
    assert all(r.ok for r in results), [r for r in results if not r.ok]


def test_renamed_method_and_missing_param_are_reported(tmp_path, site_0523):
    src = os.path.join(site_0523, "sglang", "srt", "speculative", "eagle_worker_v2.py")
    dst_dir = tmp_path / "sglang" / "srt" / "speculative"
    dst_dir.mkdir(parents=True)
    text = open(src, encoding="utf-8").read()
    text = text.replace("def verify(", "def verify_renamed(").replace(
        "def _draft_extend_for_decode(\n        self,\n        batch", "def _draft_extend_for_decode(\n        self,\n        bat")
    (dst_dir / "eagle_worker_v2.py").write_text(text)
    by_target = {s.target: s for s in specs_for(("timing",))}
    verify = check_spec(str(tmp_path), by_target["sglang.srt.speculative.eagle_worker_v2:EAGLEWorkerV2.verify"])
    assert not verify.ok and "'verify' not defined" in verify.detail
    ext = check_spec(str(tmp_path), by_target["sglang.srt.speculative.eagle_worker_v2:EagleDraftWorker._draft_extend_for_decode"])
    assert not ext.ok and "['batch'] missing" in ext.detail
    missing = check_spec(str(tmp_path), by_target["sglang.srt.managers.scheduler_components.batch_result_processor:"
                                                   "SchedulerBatchResultProcessor._resolve_spec_v2_tokens"])
    assert not missing.ok and "not found" in missing.detail


def test_cli_against_source(site_0523):
    out = subprocess.run([sys.executable, "-m", "sglang_patches", "patches", "--against-source", site_0523],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "11/11 targets resolve in sglang 0.5.23" in out.stdout


def test_cli_against_source_bad_dir(tmp_path):
    out = subprocess.run([sys.executable, "-m", "sglang_patches", "patches", "--against-source", str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert "no sglang package there" in out.stderr and "Traceback" not in out.stderr


def test_step_timing_target_resolves_in_0523(site_0523):
    results = check_all(site_0523, specs_for(["step_timing"]))
    assert len(results) == 1 and results[0].ok, results
# ---------------------------------------------------------------- compat: every contact point

def test_cli_contacts_installed_0517_all_ok():
    out = subprocess.run([sys.executable, "-m", "sglang_patches", "patches", "--contacts"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    from sglang_patches.compat import v0_5_17

    n = len(v0_5_17.contacts())
    assert f"{n}/{n} contact points OK in sglang 0.5.17" in out.stdout
    kinds = {line.split()[2] for line in out.stdout.splitlines() if line.startswith("  OK ")}
    assert kinds == {"hook", "entry", "call", "global", "attr", "weight", "fingerprint"}


def test_cli_contacts_against_0523_names_what_moved(site_0523):
    out = subprocess.run([sys.executable, "-m", "sglang_patches", "patches", "--contacts", "--against-source",
                          site_0523], capture_output=True, text=True, timeout=120)
    assert out.returncode == 1, out.stdout + out.stderr
    bad = [line.split()[1:4] for line in out.stdout.splitlines() if line.startswith("  BAD")]
    assert ["triton_draft", "fingerprint", "sglang.srt.models.llama:LlamaMLP.forward"] in bad
    assert {b[0] for b in bad} == {"draft_tp", "triton_draft"}  # marker, timing, checks, core: all OK
    assert "draft_tp: 5 BAD (the feature is refused on this version" in out.stdout


def test_features_spell_no_sglang_path():
    """Only compat/ names SGLang modules: no import of sglang and no 'sglang.xxx' string in code
    elsewhere in the package (docstrings and comments may explain the mechanism)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "sglang_patches"
    offenders = []
    for path in root.rglob("*.py"):
        if "compat" in path.relative_to(root).parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                      if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                      and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "sglang":
                offenders.append(f"{path.name}:{node.lineno} from {node.module} import")
            elif isinstance(node, ast.Import) and any(a.name.split(".")[0] == "sglang" for a in node.names):
                offenders.append(f"{path.name}:{node.lineno} import sglang")
            elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
                  and "sglang.srt" in node.value):
                offenders.append(f"{path.name}:{node.lineno} {node.value[:60]!r}")
    assert offenders == []
