"""Import boundary: what runs inside SGLang's server processes (sglang_patches/server/) and what both
halves share (vocab/, whatif/) import nothing from sglang_patches.offline, not even lazily inside a
function; whatif/ and vocab/ import nothing from sglang_patches.server either. No two modules import
each other, directly or through others."""
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


# ---------------------------------------------------------------- import circles
# Modules that import each other in a loop, directly or through others, among sglang_patches/ and the
# scripts in benchmarks/ (which import each other by bare name: they put benchmarks/ on sys.path).
# An import inside a function counts: a lazy import only hides a circle. None is known: a new one fails.
KNOWN_CIRCLES: list[set[str]] = []
BENCHMARKS = PKG.parent / "benchmarks"


def module_sources() -> dict[str, tuple[str, str]]:
    """{module name: (the dotted name relative imports resolve against, source)}; a package's
    __init__.py is the package's own name."""
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        dotted = ".".join(path.relative_to(PKG.parent).with_suffix("").parts)
        name = dotted[: -len(".__init__")] if path.name == "__init__.py" else dotted
        out[name] = (dotted, path.read_text(encoding="utf-8"))
    for path in sorted(BENCHMARKS.rglob("*.py")):  # harness/ is a package on that path
        if "results" in path.relative_to(BENCHMARKS).parts or "data" in path.relative_to(BENCHMARKS).parts:
            continue
        dotted = ".".join(path.relative_to(BENCHMARKS).with_suffix("").parts)
        name = dotted[: -len(".__init__")] if path.name == "__init__.py" else dotted
        out[name] = (dotted, path.read_text(encoding="utf-8"))
    return out


def imported_modules(tree: ast.AST, module: str, known) -> set[str]:
    """The modules of `known` that `tree` imports (module: its dotted name, for relative imports).
    `from pkg import mod` names pkg.mod alone (as `import pkg.mod` does: the package's __init__ that
    runs first is not counted), `from pkg import name` names pkg; importlib calls as imported_names."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(module.split(".")[:-node.level] + ([base] if base else []))
            out |= {f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names}
        elif isinstance(node, (ast.Import, ast.Call)):
            out |= {name for _, name in imported_names(node, module)}
    return out & set(known)


def import_graph(sources: dict[str, tuple[str, str]]) -> dict[str, set[str]]:
    """{module: the modules of `sources` it imports}; a module from outside `sources` names nothing."""
    return {name: imported_modules(ast.parse(text), dotted, sources) - {name}
            for name, (dotted, text) in sources.items()}


def circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected parts of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                part = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    part.add(member)
                    if member == node:
                        break
                if len(part) > 1:
                    found.append(part)
    return found


def test_no_import_circle():
    sources = module_sources()
    assert "sglang_patches.launch" in sources and "adaptive_summary" in sources, sorted(sources)[:5]
    graph = import_graph(sources)
    assert "sglang_patches.offline.fixtures.model_flags" in graph["sglang_patches.launch"]  # the graph is read
    # advise's table hands --adaptive-config to adaptive_config; both read their inputs from advise_inputs
    assert "sglang_patches.offline.adaptive_config" in graph["sglang_patches.offline.advise_cli"]
    assert "sglang_patches.offline.advise_inputs" in graph["sglang_patches.offline.adaptive_config"]
    new = [sorted(c) for c in circles(graph) if c not in KNOWN_CIRCLES]
    assert not new, ("modules that import each other (move what both need into a module both import, or give "
                     "the tie one direction):\n" + "\n".join(" <-> ".join(c) for c in new))


@pytest.mark.parametrize("sources, want", [
    ({"p.a": ("p.a", "from p.b import x"), "p.b": ("p.b", "def f():\n    import p.a\n")}, [{"p.a", "p.b"}]),
    ({"p": ("p.__init__", "from .a import x"), "p.a": ("p.a", "from . import b"), "p.b": ("p.b", "import p")},
     [{"p", "p.a", "p.b"}]),
    ({"a": ("a", "import b"), "b": ("b", "from c import y"), "c": ("c", "import os")}, []),
])
def test_the_circle_finder(sources, want):
    assert circles(import_graph(sources)) == want
