"""Import boundary: what runs inside SGLang's server processes (sglang_patches/server/) and what both
halves share (vocab/, whatif/) import nothing from sglang_patches.offline, not even lazily inside a
function; whatif/ and vocab/ import nothing from sglang_patches.server either."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "sglang_patches"
# folder -> the packages its modules must not import
FORBIDDEN = {"server": ("sglang_patches.offline",),
             "vocab": ("sglang_patches.offline", "sglang_patches.server"),
             "whatif": ("sglang_patches.offline", "sglang_patches.server")}


def imported_names(tree: ast.AST, module: str) -> list[tuple[int, str]]:
    """Every module an import statement anywhere in `tree` names (relative imports resolved against
    the dotted `module`), plus string arguments of importlib.import_module / __import__ calls."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.split(".")[:-node.level]
                base = ".".join(parts + ([base] if base else []))
            # `from sglang_patches import offline` names sglang_patches.offline
            out += [(node.lineno, base)] + [(node.lineno, f"{base}.{a.name}") for a in node.names]
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)
              and getattr(node.func, "attr", getattr(node.func, "id", None)) in ("import_module", "__import__")):
            out.append((node.lineno, node.args[0].value))
    return out


def violations(path: Path, forbidden: tuple[str, ...]) -> list[str]:
    rel = path.relative_to(PKG.parent)
    module = ".".join(rel.with_suffix("").parts)
    if path.name == "__init__.py":
        module = module.rsplit(".", 1)[0] + ".__init__"
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [f"{rel}:{line} imports {name}" for line, name in imported_names(tree, module)
            if any(name == f or name.startswith(f + ".") for f in forbidden)]


@pytest.mark.parametrize("folder", sorted(FORBIDDEN))
def test_no_import_across_the_boundary(folder):
    files = sorted((PKG / folder).rglob("*.py"))
    assert len(files) >= 3, f"sglang_patches/{folder}/ has only {len(files)} modules: wrong folder?"
    bad = [v for f in files for v in violations(f, FORBIDDEN[folder])]
    assert not bad, "move what both need into sglang_patches/vocab/ or whatif/:\n" + "\n".join(bad)


@pytest.mark.parametrize("src", [
    "from sglang_patches.offline.advisor import x",
    "def f():\n    from sglang_patches.offline import report\n",
    "import sglang_patches.offline.sweep.cli",
    "from sglang_patches import offline",
    "from ...offline import report",
    "import importlib\nimportlib.import_module('sglang_patches.offline.report')",
])
def test_the_walker_sees_every_form(src):
    # as if in a module under server/timing/ (three levels down: `...` is sglang_patches)
    names = [n for _, n in imported_names(ast.parse(src), "sglang_patches.server.timing.probe")]
    assert any(n == "sglang_patches.offline" or n.startswith("sglang_patches.offline.") for n in names), names


def test_the_walker_passes_the_shared_packages():
    tree = ast.parse("from sglang_patches.vocab import schema\nfrom sglang_patches.whatif.advisor import advise\n"
                     "from sglang_patches.offline_notes import x\n")
    names = [n for _, n in imported_names(tree, "sglang_patches.server.timing.runtime")]
    assert not any(n == "sglang_patches.offline" or n.startswith("sglang_patches.offline.") for n in names)
