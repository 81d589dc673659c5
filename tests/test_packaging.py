"""Packaging: every package folder is shipped, our kernels/profiling never shadow top-level names,
and source files stay small."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# top-level folder -> the package name it is shipped as (pyproject [tool.setuptools] package-dir)
ROOTS = {"sglang_patches": "sglang_patches", "kernels": "sglang_patches.kernels",
         "profiling": "sglang_patches.profiling"}
MAX_LINES = 400


def setuptools_table():
    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]


def package_dirs():
    found = {}
    for root, dotted in ROOTS.items():
        base = REPO / root
        for init in base.rglob("__init__.py"):
            rel = init.parent.relative_to(base)
            if "__pycache__" in rel.parts:
                continue
            found[".".join([dotted, *rel.parts])] = init.parent
    return found


def test_every_package_folder_is_listed():
    listed = set(setuptools_table()["packages"])
    found = package_dirs()
    assert {"sglang_patches", "sglang_patches.kernels", "sglang_patches.profiling"} <= set(found)
    missing = sorted(set(found) - listed)
    assert not missing, f"add to [tool.setuptools] packages in pyproject.toml: {missing}"
    stale = sorted(listed - set(found))
    assert not stale, f"listed in pyproject.toml but no such package folder: {stale}"


def test_package_dir_maps_kernels_and_profiling():
    pkg_dir = setuptools_table()["package-dir"]
    assert pkg_dir["sglang_patches.kernels"] == "kernels"
    assert pkg_dir["sglang_patches.profiling"] == "profiling"
    assert not any(p.split(".")[0] in ("kernels", "profiling") for p in setuptools_table()["packages"])


def test_kernels_and_profiling_importable_only_under_sglang_patches():
    # A fresh interpreter started in a neutral directory sees only what is installed (the editable
    # install): `kernels` must not resolve to our folder, and our folders must be reachable under
    # sglang_patches.*.
    code = (
        "import importlib.util, json\n"
        "out = {}\n"
        "for name in ('kernels', 'profiling', 'sglang_patches.kernels', 'sglang_patches.profiling'):\n"
        "    spec = importlib.util.find_spec(name)\n"
        "    out[name] = None if spec is None else (spec.origin or str(list(spec.submodule_search_locations or [])))\n"
        "print(json.dumps(out))\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/", env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    import json

    found = json.loads(r.stdout)
    for top in ("kernels", "profiling"):
        ours = str(REPO / top)
        assert found[top] is None or ours not in found[top], f"top-level {top!r} resolves to our {ours}"
        assert found[f"sglang_patches.{top}"] is not None and ours in found[f"sglang_patches.{top}"]


def test_subpackages_resolve_in_this_process():
    for name in ("sglang_patches.kernels", "sglang_patches.profiling"):
        spec = importlib.util.find_spec(name)
        assert spec is not None, name


def test_source_files_are_small():
    too_long = []
    # the shipped package, the scripts beside it (benchmarks/ grew a 448-line file before this) and the
    # tests (three test files had grown to 460-570 lines)
    paths = [p for root in ("sglang_patches", "kernels", "profiling", "benchmarks", "tests")
             for p in (REPO / root).rglob("*.py")]
    for path in sorted(paths):
        n = len(path.read_text(encoding="utf-8").splitlines())
        if n > MAX_LINES:
            too_long.append(f"{path.relative_to(REPO)}: {n} lines")
    assert not too_long, f"split these files (max {MAX_LINES} lines): {too_long}"
