"""Resolve hook targets against an SGLang source tree *without importing it* (AST only).

Used to check that every patch target still exists, with the expected parameters, in an SGLang
source tree that is not the installed one (e.g. `pip install --no-deps --target SITE_DIR
sglang==VERSION`, a release whose own dependencies are not installed here):
`sglang-patches patches --against-source SITE_DIR`.
"""
from __future__ import annotations

import ast
import dataclasses
import os

from sglang_patches.compat.contacts import _find, _params
from sglang_patches.compat.contacts import module_file as _module_file
from sglang_patches.server.hooks import HookSpec


@dataclasses.dataclass
class StaticResult:
    target: str
    ok: bool
    detail: str


def check_spec(site: str, spec: HookSpec, _cache: dict | None = None) -> StaticResult:
    module, _, path = spec.target.partition(":")
    file = _module_file(site, module)
    if file is None:
        return StaticResult(spec.target, False, f"module {module} not found under {site}")
    cache = _cache if _cache is not None else {}
    if file not in cache:
        cache[file] = _parse(file)
    if isinstance(cache[file], str):
        return StaticResult(spec.target, False, f"{os.path.relpath(file, site)} is unreadable ({cache[file]})")
    body = cache[file].body
    node = None
    for part in path.split("."):
        node = _find(body, part)
        if node is None:
            return StaticResult(spec.target, False, f"{part!r} not defined in {os.path.relpath(file, site)}")
        body = node.body
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return StaticResult(spec.target, False, "not a function")
    names, var_kw = _params(node)
    missing = [p for p in spec.params if p not in names and not var_kw]
    if missing:
        return StaticResult(spec.target, False, f"parameters {missing} missing (has {sorted(names)})")
    return StaticResult(spec.target, True, f"{os.path.relpath(file, site)}:{node.lineno}")


def _parse(file: str):
    """The module's AST, or one line saying why it cannot be read (the target then counts as missing)."""
    try:
        with open(file, encoding="utf-8") as fh:
            return ast.parse(fh.read(), filename=file)
    except UnicodeDecodeError as exc:
        return f"not UTF-8 text: byte {exc.start}"
    except SyntaxError as exc:
        return f"syntax error at line {exc.lineno}: {exc.msg}"
    except (OSError, ValueError, RecursionError, MemoryError) as exc:
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def check_all(site: str, specs: list[HookSpec]) -> list[StaticResult]:
    cache: dict = {}
    return [check_spec(site, s, cache) for s in specs]


def sglang_version_at(site: str) -> str:
    for entry in sorted(os.listdir(site)):
        if entry.startswith("sglang-") and entry.endswith(".dist-info"):
            return entry[len("sglang-"):-len(".dist-info")]
    return "unknown"
