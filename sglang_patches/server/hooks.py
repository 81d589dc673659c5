"""The one hook registry every overlay patch goes through.

A `HookSpec` names its target as `"package.module:Class.method"` (or `"package.module:function"`),
the parameter names the target must still accept, and how to wrap it:

- `before`: `fn(*args, **kwargs)` runs first; its return value is ignored.
- `after`:  `fn(result, *args, **kwargs)` runs after; its return value is ignored.
- `around`: `fn(original, *args, **kwargs)` replaces the call and decides whether to call through.

`HookRegistry.apply(specs)` resolves and validates every spec first (module importable, attribute
present, signature still has the expected parameters) and only then patches, so a missing or
changed target fails the whole set with a `PatchTargetError` naming the target and the installed
SGLang version; nothing is half-applied. Every application is recorded and `undo()` restores the
exact original objects (also module-level aliases re-bound with `rebind=True`, and copies of the
wrapper a module imported by name after it was applied), newest first.

Features that change SGLang state outside a hook (an instance attribute, a module global, a weight's
storage; each declared as a contact in compat/) record the change with `record_change(contact,
restore)`; `undo()` runs those restores first, newest first, then undoes the hooks.

Why not SGLang's own `sglang.srt.plugins.HookRegistry`: it has no undo (`reset()` clears the list
but leaves patches in place), no signature/version check, and silently skips a missing target. We
still use SGLang's plugin *entry-point* loader to get into plain `sglang.launch_server` (see
`sglang_patches.plugin`), and imitate its alias re-binding for functions imported by name.
"""
from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import sys
import threading
from typing import Any, Callable, Iterable

from sglang_patches.errors import PatchTargetError

KINDS = ("before", "after", "around")
MARK = "__sglang_patches_hook__"


@dataclasses.dataclass(frozen=True)
class HookSpec:
    target: str
    kind: str
    fn: Callable
    params: tuple[str, ...] = ()
    feature: str = "core"
    rebind: bool = False
    note: str = ""

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"hook kind {self.kind!r} is not one of {KINDS}")
        if ":" not in self.target:
            raise ValueError(f"hook target {self.target!r} must look like 'package.module:Class.attr'")


@dataclasses.dataclass
class AppliedHook:
    spec: HookSpec
    owner: Any  # module or class the attribute lives on
    attr: str
    original: Any  # the static attribute as it was (function, staticmethod, ...)
    wrapper: Any
    rebound: list[tuple[Any, str]]  # (module, global name) re-bound to the wrapper

    def describe(self) -> str:
        return f"{self.spec.feature:<8} {self.spec.kind:<6} {self.spec.target}"


@dataclasses.dataclass
class AppliedChange:
    """A change to SGLang state made outside a hook, and the function that puts the old state back."""
    target: str
    feature: str
    restore: Callable[[], None]
    what: str = ""

    def describe(self) -> str:
        return f"{self.feature:<8} change {self.target}" + (f" ({self.what})" if self.what else "")


def installed_sglang_version() -> str:
    try:
        from importlib.metadata import version

        return version("sglang")
    except Exception:  # noqa: BLE001 - not installed or broken metadata
        mod = sys.modules.get("sglang")
        return getattr(mod, "__version__", "not installed")


def resolve_target(target: str):
    """Return (owner, attr, static_value) for 'module:Class.attr', or raise PatchTargetError."""
    module_name, _, path = target.partition(":")
    version = installed_sglang_version()
    try:
        owner = importlib.import_module(module_name)
    except ImportError as exc:
        raise PatchTargetError(
            f"patch target {target}: module {module_name} cannot be imported ({exc}) under sglang "
            f"{version}; install a supported sglang (see `sglang-patches patches`) or disable this feature with --patches"
        ) from None
    parts = path.split(".")
    for name in parts[:-1]:
        if not hasattr(owner, name):
            raise PatchTargetError(
                f"patch target {target}: {module_name} has no {name!r} in sglang {version}; "
                f"this SGLang is not supported by this overlay version"
            )
        owner = getattr(owner, name)
    attr = parts[-1]
    try:
        static = inspect.getattr_static(owner, attr)
    except AttributeError:
        raise PatchTargetError(
            f"patch target {target}: {attr!r} is missing in sglang {version}; the hook point moved or was "
            f"removed; use a supported sglang or disable the feature with --patches"
        ) from None
    return owner, attr, static


def _callable_of(static):
    return static.__func__ if isinstance(static, (staticmethod, classmethod)) else static


def check_signature(spec: HookSpec, static) -> None:
    func = _callable_of(static)
    if not callable(func):
        raise PatchTargetError(f"patch target {spec.target} is not callable (it is {type(func).__name__})")
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):
        return  # builtins without signatures: nothing to check
    names = set(sig.parameters)
    has_var_kw = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
    missing = [p for p in spec.params if p not in names and not has_var_kw]
    if missing:
        raise PatchTargetError(
            f"patch target {spec.target} changed in sglang {installed_sglang_version()}: expected "
            f"parameter(s) {', '.join(missing)} in {sig}; this SGLang is not supported by this overlay version"
        )


def _make_wrapper(spec: HookSpec, original: Callable) -> Callable:
    fn = spec.fn
    if spec.kind == "before":
        def wrapper(*args, **kwargs):
            fn(*args, **kwargs)
            return original(*args, **kwargs)
    elif spec.kind == "after":
        def wrapper(*args, **kwargs):
            result = original(*args, **kwargs)
            fn(result, *args, **kwargs)
            return result
    else:
        def wrapper(*args, **kwargs):
            return fn(original, *args, **kwargs)
    functools.update_wrapper(wrapper, original)
    setattr(wrapper, MARK, spec)
    return wrapper


def _aliases(original: Callable, owner: Any) -> list[tuple[Any, str]]:
    """Module globals (other than the owner) bound to `original`, e.g. `from X import f` copies."""
    found = []
    for mod in list(sys.modules.values()):
        if mod is None or mod is owner:
            continue
        try:
            items = list(vars(mod).items())
        except TypeError:
            continue
        found += [(mod, name) for name, value in items if value is original]
    return found


class HookRegistry:
    """Applies HookSpecs atomically and undoes them in reverse order."""

    def __init__(self):
        self._applied: list[AppliedHook] = []
        self._changes: list[AppliedChange] = []
        self._lock = threading.Lock()

    @property
    def applied(self) -> list[AppliedHook]:
        return list(self._applied)

    @property
    def changes(self) -> list[AppliedChange]:
        return list(self._changes)

    def record_change(self, contact, restore: Callable[[], None], what: str = "") -> AppliedChange:
        """Record a change to `contact` (a compat Contact) that `restore()` undoes."""
        change = AppliedChange(contact.target, contact.feature, restore, what)
        with self._lock:
            self._changes.append(change)
        return change

    def validate(self, specs: Iterable[HookSpec]) -> list[tuple[HookSpec, Any, str, Any]]:
        resolved = []
        for spec in specs:
            owner, attr, static = resolve_target(spec.target)
            check_signature(spec, static)
            resolved.append((spec, owner, attr, static))
        return resolved

    def apply(self, specs: Iterable[HookSpec]) -> list[AppliedHook]:
        specs = list(specs)
        with self._lock:
            self.validate(specs)  # all-or-nothing: fail before touching anything
            done: list[AppliedHook] = []
            for spec in specs:
                owner, attr, static = resolve_target(spec.target)  # re-resolve: earlier specs may stack
                original = _callable_of(static)
                wrapper = _make_wrapper(spec, original)
                if isinstance(static, staticmethod):
                    new_static = staticmethod(wrapper)
                elif isinstance(static, classmethod):
                    new_static = classmethod(wrapper)
                else:
                    new_static = wrapper
                rebound = _aliases(original, owner) if spec.rebind else []
                setattr(owner, attr, new_static)
                for mod, name in rebound:
                    setattr(mod, name, wrapper)
                done.append(AppliedHook(spec, owner, attr, static, wrapper, rebound))
            self._applied += done
            return done

    def undo(self, hooks: Iterable[AppliedHook | AppliedChange] | None = None) -> int:
        """Undo `hooks` (default: every change and hook), changes first, each newest first.
        Returns how many were undone."""
        with self._lock:
            chosen = None if hooks is None else list(hooks)
            changes = self._changes if chosen is None else [c for c in chosen if c in self._changes]
            count = 0
            for change in reversed(list(changes)):
                change.restore()
                self._changes.remove(change)
                count += 1
            targets = self._applied if chosen is None else [h for h in chosen if h in self._applied]
            for hook in reversed(list(targets)):
                setattr(hook.owner, hook.attr, hook.original)
                original = _callable_of(hook.original)
                # a rebind hook's copies: those re-bound at apply, and those a module imported by name
                # after it (they copied the wrapper)
                later = _aliases(hook.wrapper, hook.owner) if hook.spec.rebind else []
                for mod, name in list(hook.rebound) + later:
                    if vars(mod).get(name) is hook.wrapper:
                        setattr(mod, name, original)
                self._applied.remove(hook)
                count += 1
            return count


def is_patched(obj: Any) -> bool:
    return hasattr(_callable_of(obj), MARK)


REGISTRY = HookRegistry()
