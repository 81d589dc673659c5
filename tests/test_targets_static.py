"""Hook targets resolve statically (AST, no import) in sglang 0.5.23 and agree with the real
import-based resolution in the installed SGLang (the version under test); every contact point of
the installed version's compat file is OK; the contact check reports what moved between versions,
including a parameter that became required."""
import os
import shutil
import subprocess
import sys

import pytest

from sglang_patches.server.hooks import REGISTRY
from sglang_patches.vocab.overlay_config import FEATURES
from sglang_patches.server.patches.catalog import specs_for
from sglang_patches.compat.static_targets import check_all, check_spec, sglang_version_at

SITE_0523 = os.environ.get("SGP_SGLANG_0523_SITE", os.path.join(os.path.dirname(__file__), "..", ".venv-test", "sglang-0523"))


def _site_installed():
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


def test_static_agrees_with_import_in_installed():
    specs = specs_for(FEATURES)
    REGISTRY.validate(specs)  # real import + signature check
    results = check_all(_site_installed(), specs)
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

def test_cli_contacts_installed_all_ok():
    from conftest import sglang_under_test

    from sglang_patches import compat

    version = sglang_under_test()
    out = subprocess.run([sys.executable, "-m", "sglang_patches", "patches", "--contacts"],
                         capture_output=True, text=True, timeout=120)
    mod = compat.for_version(version)
    assert mod.COVERS == (version, version)  # the version under test has a compat file of its own
    n = len(mod.contacts())
    assert f"contact points of {mod.__name__.rsplit('.', 1)[1]}" in out.stdout
    assert f"{n}/{n} contact points OK in sglang {version}" in out.stdout, out.stdout
    assert out.returncode == 0, out.stdout + out.stderr
    kinds = {line.split()[2] for line in out.stdout.splitlines() if line.startswith("  OK ")}
    assert kinds == {"hook", "entry", "call", "global", "attr", "weight", "fingerprint"}


def test_0517_contacts_against_0523_name_what_moved(site_0523):
    """The 0.5.17 file's contact points checked against 0.5.23's real source: what the 0.5.23 file had
    to change, including patch_tensor_parallel_group's new required keyword owns_attention."""
    from sglang_patches.compat import v0_5_17

    bad = {}
    for ct in v0_5_17.contacts():
        ok, detail = ct.check_static(site_0523)
        if not ok:
            bad[ct.target] = (ct.feature, detail)
    assert {f for f, _ in bad.values()} == {"draft_tp", "triton_draft", "timing", "adaptive_graphs"}  # core, marker, checks, ...
    # adaptive_graphs: 0.5.23's resolve_num_tokens_per_req dropped server_args (it reads the store itself),
    # and ServerArgs.speculative_adaptive (the Engine's rule reads it) moved to arg_groups/fields/ as below
    assert "'server_args'" in bad["sglang.srt.speculative.spec_utils:resolve_num_tokens_per_req"][1]
    assert sorted(t for t, (f, _) in bad.items() if f == "adaptive_graphs") == [
        "sglang.srt.server_args:ServerArgs.speculative_adaptive", "sglang.srt.speculative.spec_utils:resolve_num_tokens_per_req"]
    # timing: only the ServerArgs fields, which 0.5.23 declares in arg_groups/fields/ instead
    assert sorted(t for t, (f, _) in bad.items() if f == "timing") == [
        f"sglang.srt.server_args:ServerArgs.{n}" for n in ("model_path", "speculative_algorithm",
                                                          "speculative_draft_model_path")]
    ptpg = bad["sglang.srt.distributed.parallel_state:patch_tensor_parallel_group"][1]
    assert "requires ['owns_attention'] (no default)" in ptpg and "passes ['tp_group']" in ptpg
    assert "['ps'] missing" in bad["sglang.srt.speculative.eagle_worker_v2:EagleDraftWorker.__init__"][1]
    assert "!= expected" in bad["sglang.srt.models.llama:LlamaMLP.forward"][1]
    # the same contact reads OK in 0.5.17's own source
    assert v0_5_17.PATCH_TENSOR_PARALLEL_GROUP.check_static(_site_0517_source())[0]


def _site_0517_source():
    from sglang_patches.compat.static_targets import sglang_version_at

    import site as _site

    for d in _site.getsitepackages():
        if sglang_version_at(d) == "0.5.17":
            return d
    pytest.skip("the venv's sglang 0.5.17 is not in site-packages")


NEW_REQUIRED_SRC = """
import dataclasses

def launch(server_args, run_func=None, *, owns_attention):
    pass

def plain(parent_pid, include_parent=True, *, timeout=60, **extra):
    pass

class Server:
    def method(self, parser, mode):
        pass

    @staticmethod
    def add(parser):
        pass

@dataclasses.dataclass
class Req:
    server_args: dict
    rid: str = None
    kind: "ClassVar[int]"

class Req2:
    def __init__(self, server_args, *, layout):
        pass
"""


@pytest.mark.parametrize("target,passes,ok,detail", [
    ("launch", ("server_args", "run_func"), False, "requires ['owns_attention'] (no default)"),
    ("launch", ("server_args", "owns_attention"), True, ""),
    ("launch", (), False, "requires ['server_args', 'owns_attention']"),
    ("plain", ("parent_pid", "include_parent"), True, ""),   # only defaults and **extra beyond what we pass
    ("plain", (), False, "requires ['parent_pid']"),
    ("Server.method", ("parser",), False, "requires ['mode']"),  # self is bound, not required of us
    ("Server.add", ("parser",), True, ""),
    ("Req", ("server_args",), True, ""),                       # field with a default and ClassVar left out
    ("Req", (), False, "requires ['server_args']"),
    ("Req2", ("server_args",), False, "requires ['layout']"),
    ("launch", None, True, ""),                                # passes None: not checked (a hook's wrapper)
])
def test_contact_catches_a_new_required_parameter(tmp_path, target, passes, ok, detail):
    from sglang_patches.compat.contacts import Contact

    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "mod.py").write_text(NEW_REQUIRED_SRC)
    got_ok, got = Contact("call", f"pkg.mod:{target}", "core", passes=passes).check_static(str(tmp_path))
    assert got_ok is ok, got
    assert detail in got


def test_cli_contacts_reports_a_new_required_parameter_bad(tmp_path, site_0523):
    """`patches --contacts --against-source` on a copy of 0.5.23 in which prepare_server_args (which
    the launcher calls with argv only) gained a required keyword: BAD, exit 1."""
    site = tmp_path / "site"
    shutil.copytree(os.path.join(site_0523, "sglang-0.5.23.dist-info"), site / "sglang-0.5.23.dist-info")
    shutil.copytree(os.path.join(site_0523, "sglang"), site / "sglang", copy_function=os.symlink,
                    ignore=shutil.ignore_patterns("__pycache__"))  # links: only the file edited is copied
    args_py = site / "sglang" / "srt" / "server_args.py"
    text = args_py.read_text(encoding="utf-8")
    args_py.unlink()
    assert text.count("def prepare_server_args(argv: list[str])") == 1
    args_py.write_text(text.replace("def prepare_server_args(argv: list[str])",
                                    "def prepare_server_args(argv: list[str], *, strict: bool)"))
    out = subprocess.run([sys.executable, "-m", "sglang_patches", "patches", "--contacts", "--against-source",
                          str(site)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 1, out.stdout + out.stderr
    line = [ln for ln in out.stdout.splitlines() if "server_args:prepare_server_args" in ln]
    assert len(line) == 1 and line[0].startswith("  BAD core") and "requires ['strict'] (no default)" in line[0]


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


def test_cli_contacts_of_a_version_between_names_the_file_used(tmp_path, site_0523):
    """A source tree that says it is 0.5.20 (no compat file of its own) is checked with the nearest
    lower file, and the output says so."""
    site = tmp_path / "site"
    shutil.copytree(os.path.join(site_0523, "sglang"), site / "sglang", copy_function=os.symlink,
                    ignore=shutil.ignore_patterns("__pycache__"))
    (site / "sglang-0.5.20.dist-info").mkdir()
    out = subprocess.run([sys.executable, "-m", "sglang_patches", "patches", "--contacts", "--against-source",
                          str(site)], capture_output=True, text=True, timeout=120)
    first = out.stdout.splitlines()[0]
    assert first.startswith(f"sglang 0.5.20 at {site}: contact points of v0_5_17, the nearest lower compat "
                            "file: sglang 0.5.20 was not tested"), first
