"""Position-free, Python-version-free hashes of functions in source files (stdlib only: a test runs this
file under other Python versions to show the hashes do not move)."""
from __future__ import annotations

import ast
import hashlib


def _function_node(file: str, path: str):
    with open(file, encoding="utf-8") as fh:
        body = ast.parse(fh.read(), filename=file).body
    node = None
    for part in path.split("."):
        node = next((n for n in body if getattr(n, "name", None) == part), None)
        if node is None:
            return None
        body = node.body
    return node


_VERSION_FIELDS = frozenset({"type_params", "type_comment", "kind"})  # absent or new in some Pythons


def _canonical(node) -> str:
    """A position-free text of an AST that is the same on Python 3.10-3.13 for the same source."""
    if isinstance(node, ast.AST):
        fields = ",".join(f"{f}={_canonical(getattr(node, f, None))}" for f in node._fields
                          if f not in _VERSION_FIELDS)
        return f"{type(node).__name__}({fields})"
    if isinstance(node, list):
        return "[" + ",".join(_canonical(x) for x in node) + "]"
    return repr(node)


def fingerprint(file: str, path: str) -> str | None:
    """Position-free AST hash of `Class.method` in `file` (None if it is not there)."""
    node = _function_node(file, path)
    return None if node is None else hashlib.sha256(_canonical(node).encode()).hexdigest()[:16]
