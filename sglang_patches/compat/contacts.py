"""A contact point: one thing in SGLang the overlay wraps, calls, reads, swaps or re-implements.

Each SGLang version file (`compat/v0_5_17.py`, ...) declares every contact point of every feature as
a `Contact`; the features take their targets from there. A contact is checked two ways:
- `check_static(site)`: against a source tree by AST (no import): the module file exists, the
  function/class/global/attribute is defined, a function still has the parameters we pass, and a
  re-implemented function's AST fingerprint is unchanged. `sglang-patches patches --contacts` runs
  it against the installed SGLang's files, or with `--against-source DIR` against a source tree.
- `resolve()` / `owner()`: the live object (imports the module) for features to use.

Kinds:
  hook         a function/method the hook registry wraps (params: those the wrapper relies on)
  entry        an SGLang entry point whose parameter (or class attribute) we pass our function through
  call         a function or class of SGLang the overlay calls or instantiates
  global       a module global the overlay reads or swaps
  attr         an attribute of a class's instances (assigned as `self.X` in its methods, or in the
               class body) the overlay reads or swaps
  weight       a module attribute whose parameters' storage the overlay replaces
  fingerprint  a function the overlay re-implements: its AST hash must equal `expected`
`undo` says how a change is undone ("" for read-only contacts).

`params` are the parameters the overlay relies on (each must still exist). `passes`, for what the
overlay itself calls (call, entry), is the set of parameters its calls bind, by position or name:
any other parameter without a default is one that SGLang now requires and our call does not give,
so the contact is BAD (e.g. a new keyword-only argument). For a class, its `__init__` in the class
body is read, else its annotated fields without a default (dataclass / msgspec.Struct). `passes`
None: the overlay does not call it with a fixed argument list (a hook's wrapper forwards whatever
SGLang's caller passes; a pass-through such as run_scheduler_process(*args, **kwargs)).
"""
from __future__ import annotations

import ast
import dataclasses
import importlib
import os

KINDS = ("hook", "entry", "call", "global", "attr", "weight", "fingerprint")


@dataclasses.dataclass(frozen=True)
class Contact:
    kind: str
    target: str               # "package.module:Qual.name"
    feature: str              # the overlay feature (or "core": launcher / engine / scheduler entry)
    params: tuple[str, ...] = ()
    use: str = ""             # what the overlay does with it
    undo: str = ""            # how that is undone
    expected: str | None = None  # fingerprint: the AST hash in this SGLang version
    passes: tuple[str, ...] | None = None  # call/entry: the parameters our calls bind (see above)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"contact kind {self.kind!r} is not one of {KINDS}")
        if ":" not in self.target:
            raise ValueError(f"contact target {self.target!r} must look like 'package.module:Qual.name'")

    @property
    def module(self) -> str:
        return self.target.partition(":")[0]

    @property
    def path(self) -> str:
        return self.target.partition(":")[2]

    @property
    def name(self) -> str:
        return self.path.rsplit(".", 1)[-1]

    # ---- live objects (imports SGLang) ----------------------------------------------------
    def owner(self):
        """The module or class that holds the attribute `name`."""
        obj = importlib.import_module(self.module)
        for part in self.path.split(".")[:-1]:
            obj = getattr(obj, part)
        return obj

    def resolve(self):
        return getattr(self.owner(), self.name)

    def set(self, value) -> None:
        setattr(self.owner(), self.name, value)

    def hook(self, kind: str, fn, **kw):
        """A HookSpec on this contact (kind before|after|around), with this contact's params."""
        from sglang_patches.server.hooks import HookSpec

        return HookSpec(self.target, kind, fn, params=self.params, feature=self.feature, **kw)

    # ---- static check (AST, nothing imported) ---------------------------------------------
    def check_static(self, site: str, cache: dict | None = None) -> tuple[bool, str]:
        file = module_file(site, self.module)
        if file is None:
            return False, f"module {self.module} not found"
        rel = os.path.relpath(file, site)
        if self.kind == "fingerprint":
            from sglang_patches.compat.fingerprint import fingerprint

            got = fingerprint(file, self.path)
            if got is None:
                return False, f"{self.path} not defined in {rel}"
            return (got == self.expected,
                    f"{rel}: AST {got}" + ("" if got == self.expected else f" != expected {self.expected}"))
        tree = _parse(file, cache)
        parts = self.path.split(".")
        body, node = tree.body, None
        for i, part in enumerate(parts):
            found = _find(body, part)
            if found is None and i == len(parts) - 1 and self.kind in ("global", "attr", "weight", "entry", "call"):
                where = node if node is not None else tree
                line = _assigned(where, part, instance=isinstance(node, ast.ClassDef))
                if line is not None:
                    return True, f"{rel}:{line} (assigned)"
            if found is None:
                return False, f"{part!r} not defined in {rel}"
            node, body = found, getattr(found, "body", [])
        relied = tuple(dict.fromkeys(self.params + (self.passes or ())))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and relied:
            names, var_kw = _params(node)
            missing = [p for p in relied if p not in names and not var_kw]
            if missing:
                return False, f"parameters {missing} missing (has {sorted(names)})"
        elif self.params and isinstance(node, ast.ClassDef):
            return False, "a class, not a function"
        if self.passes is not None:
            required = _required(node, method=len(parts) > 1 and _is_class(tree, parts[:-1]))
            if required is None:
                return False, "not a function or class, so the arguments we pass cannot be checked"
            new = [p for p in required if p not in self.passes]
            if new:
                return False, (f"requires {new} (no default), which the overlay does not pass "
                               f"(it passes {list(self.passes) or 'nothing'})")
        if self.kind == "hook" and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return False, "not a function"
        return True, f"{rel}:{node.lineno}"


@dataclasses.dataclass(frozen=True)
class Refused:
    """A setting of an SGLang version that a feature cannot follow yet: refused before the server
    starts (compat.setting_refusal). `setting` is "--pp-size" (refused above 1) or the name of an
    environment variable SGLang reads as a boolean (refused when SGLang would read it as true).
    `why` says what would go wrong; `fix` how to run instead."""
    feature: str
    setting: str
    why: str
    fix: str


def module_file(site: str, module: str) -> str | None:
    base = os.path.join(site, *module.split("."))
    for path in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(path):
            return path
    return None


def _parse(file: str, cache: dict | None):
    cache = {} if cache is None else cache
    if file not in cache:
        with open(file, encoding="utf-8") as fh:
            cache[file] = ast.parse(fh.read(), filename=file)
    return cache[file]


def _find(body, name):
    for node in body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return node
    return None


def _params(fn) -> tuple[set[str], bool]:
    a = fn.args
    names = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
    if a.vararg:
        names.add(a.vararg.arg)
    return names, a.kwarg is not None


def _is_class(tree, parts) -> bool:
    body, node = tree.body, None
    for part in parts:
        node = _find(body, part)
        if node is None:
            return False
        body = getattr(node, "body", [])
    return isinstance(node, ast.ClassDef)


def _required(node, *, method: bool) -> list[str] | None:
    """The parameters a call must bind: those without a default (not *args / **kwargs); for a
    method the implicit first one (self / cls) is left out unless it is a staticmethod. A class:
    its own `__init__`, else its annotated fields without a value (dataclass, msgspec.Struct;
    ClassVar excluded). None when `node` is neither."""
    if isinstance(node, ast.ClassDef):
        init = _find(node.body, "__init__")
        if init is not None:
            return _required(init, method=True)
        return [st.target.id for st in node.body
                if isinstance(st, ast.AnnAssign) and st.value is None and isinstance(st.target, ast.Name)
                and "ClassVar" not in ast.unparse(st.annotation)]
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    a = node.args
    positional = a.posonlyargs + a.args
    if method and positional and not any(ast.unparse(d) == "staticmethod" for d in node.decorator_list):
        positional = positional[1:]
    n_plain = len(positional) - len(a.defaults)
    out = [x.arg for x in positional[:max(n_plain, 0)]]
    out += [x.arg for x, d in zip(a.kwonlyargs, a.kw_defaults) if d is None]
    return out


def _assigned(scope, name: str, *, instance: bool) -> int | None:
    """Line where `name` is bound in `scope`'s body (assignment, annotation, import), or, for a class
    (`instance`), assigned as `self.name` in any of its methods."""
    for node in scope.body:
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            if any((a.asname or a.name.split(".")[0]) == name for a in node.names):
                return node.lineno
        for t in targets:
            if isinstance(t, ast.Name) and t.id == name:
                return node.lineno
    if instance:
        for node in ast.walk(scope):
            if (isinstance(node, ast.Attribute) and node.attr == name and isinstance(node.ctx, ast.Store)
                    and isinstance(node.value, ast.Name) and node.value.id == "self"):
                return node.lineno
    return None
