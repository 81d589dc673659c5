"""sglang_patches.server.hooks: wrapping semantics on small local targets, all-or-nothing validation, and
the real overlay catalogue applied to / undone from the REAL SGLang classes of the version under test
(CPU import; 0.5.17 and 0.5.23 runs)."""
from __future__ import annotations

import inspect
import sys
import types

import pytest
from conftest import sglang_under_test

from sglang_patches.server import hooks
from sglang_patches.errors import PatchTargetError
from sglang_patches.server.hooks import HookRegistry, HookSpec, installed_sglang_version
from sglang_patches.vocab.overlay_config import OverlayConfig, parse_patch_list

HERE = __name__  # the targets below live in this test module (our own code)


class Target:
    """A tiny class to hook; records every call."""

    calls: list = []

    def method(self, x, y=0):
        Target.calls.append(("method", x, y))
        return x + y

    @staticmethod
    def smethod(a, b):
        Target.calls.append(("smethod", a, b))
        return a * b

    @classmethod
    def cmethod(cls, a):
        Target.calls.append(("cmethod", cls, a))
        return -a


@pytest.fixture
def reg():
    r = HookRegistry()
    originals = dict(vars(Target))
    Target.calls = []
    yield r
    r.undo()
    for name in ("method", "smethod", "cmethod"):  # leave Target exactly as it was for other tests
        setattr(Target, name, originals[name])


# ---------------------------------------------------------------- semantics

def test_before_after_around_and_arguments(reg):
    log = []
    reg.apply([HookSpec(f"{HERE}:Target.method", "before",
                        lambda self, x, y=0: log.append(("before", type(self).__name__, x, y)))])
    assert Target().method(2, y=3) == 5
    assert log == [("before", "Target", 2, 3)]
    assert Target.calls == [("method", 2, 3)]  # the original ran after the before-hook

    reg.undo()
    log.clear()
    reg.apply([HookSpec(f"{HERE}:Target.method", "after",
                        lambda result, self, x, y=0: log.append(("after", result, x, y)))])
    assert Target().method(4, 1) == 5  # result passes through unchanged (hook's return ignored)
    assert log == [("after", 5, 4, 1)]

    reg.undo()
    log.clear()

    def around(original, self, x, y=0):
        log.append(("around", x, y))
        return original(self, x * 10, y) + 1

    reg.apply([HookSpec(f"{HERE}:Target.method", "around", around)])
    assert Target().method(1, 2) == 13
    assert log == [("around", 1, 2)]

    def skip(original, self, x, y=0):
        return "skipped"

    reg.undo()
    Target.calls = []
    reg.apply([HookSpec(f"{HERE}:Target.method", "around", skip)])
    assert Target().method(1) == "skipped" and Target.calls == []  # around decides to not call through


def test_staticmethod_and_classmethod_targets(reg):
    seen = []
    s_orig = Target.__dict__["smethod"]
    c_orig = Target.__dict__["cmethod"]
    reg.apply([
        HookSpec(f"{HERE}:Target.smethod", "before", lambda a, b: seen.append(("s", a, b)), params=("a", "b")),
        HookSpec(f"{HERE}:Target.cmethod", "after", lambda r, cls, a: seen.append(("c", r, cls, a)),
                 params=("cls", "a")),
    ])
    assert isinstance(Target.__dict__["smethod"], staticmethod)
    assert isinstance(Target.__dict__["cmethod"], classmethod)
    assert Target.smethod(3, 4) == 12 and Target().smethod(2, 5) == 10
    assert Target.cmethod(7) == -7
    assert seen == [("s", 3, 4), ("s", 2, 5), ("c", -7, Target, 7)]
    assert hooks.is_patched(Target.__dict__["smethod"]) and hooks.is_patched(Target.__dict__["cmethod"])
    assert reg.undo() == 2
    assert Target.__dict__["smethod"] is s_orig and Target.__dict__["cmethod"] is c_orig


def test_undo_restores_identity_and_stacked_hooks_in_reverse(reg):
    original = Target.__dict__["method"]
    order = []
    first = reg.apply([HookSpec(f"{HERE}:Target.method", "before", lambda *a, **k: order.append(1))])
    after_first = Target.__dict__["method"]
    second = reg.apply([HookSpec(f"{HERE}:Target.method", "before", lambda *a, **k: order.append(2))])
    assert Target.__dict__["method"].__wrapped__ is after_first
    assert after_first.__wrapped__ is original
    Target().method(1)
    assert order == [2, 1]  # newest hook is the outermost
    assert [h.wrapper for h in reg.applied] == [first[0].wrapper, second[0].wrapper]
    assert reg.undo(second) == 1
    assert Target.__dict__["method"] is after_first
    assert reg.undo() == 1
    assert Target.__dict__["method"] is original
    assert not hooks.is_patched(Target.__dict__["method"])
    assert reg.undo() == 0


def test_undo_all_of_a_stack_goes_newest_first(reg):
    original = Target.__dict__["method"]
    reg.apply([HookSpec(f"{HERE}:Target.method", "before", lambda *a, **k: None),
               HookSpec(f"{HERE}:Target.method", "after", lambda *a, **k: None)])
    assert inspect.unwrap(Target.__dict__["method"]) is original
    assert reg.undo() == 2
    assert Target.__dict__["method"] is original  # reverse order: the oldest saved object wins


def test_rebind_aliases_and_undo(reg, monkeypatch):
    src = types.ModuleType("sp_test_src")

    def f(v):
        return v + 1

    f.__module__ = src.__name__
    src.f = f
    user = types.ModuleType("sp_test_user")
    user.f = f  # what `from sp_test_src import f` leaves behind
    user.g = f  # a second alias under another name
    other = types.ModuleType("sp_test_other")
    other.f = lambda v: v  # same name, different object: must be left alone
    keep = other.f
    for m in (src, user, other):
        monkeypatch.setitem(sys.modules, m.__name__, m)

    seen = []
    [hook] = reg.apply([HookSpec("sp_test_src:f", "before", lambda v: seen.append(v), rebind=True)])
    assert src.f is hook.wrapper and user.f is hook.wrapper and user.g is hook.wrapper
    assert other.f is keep
    assert user.f(1) == 2 and seen == [1]
    assert reg.undo() == 1
    assert src.f is f and user.f is f and user.g is f and other.f is keep

    # a module that imports the function by name after the hook: it copies the wrapper; undo restores it
    [hook] = reg.apply([HookSpec("sp_test_src:f", "before", lambda v: seen.append(v), rebind=True)])
    late = types.ModuleType("sp_test_late")
    late.f = src.f
    monkeypatch.setitem(sys.modules, late.__name__, late)
    assert late.f is hook.wrapper
    assert reg.undo() == 1
    assert src.f is f and late.f is f and user.f is f

    # without rebind the alias keeps the unpatched function
    [hook] = reg.apply([HookSpec("sp_test_src:f", "before", lambda v: seen.append(v))])
    assert src.f is hook.wrapper and user.f is f
    reg.undo()


def test_bad_spec_arguments():
    with pytest.raises(ValueError, match="kind"):
        HookSpec(f"{HERE}:Target.method", "instead", lambda *a: None)
    with pytest.raises(ValueError, match="package.module:Class.attr"):
        HookSpec(f"{HERE}.Target.method", "before", lambda *a: None)


# ---------------------------------------------------------------- validation, all-or-nothing

BROKEN = [
    ("sp_no_such_module_xyz:Thing.f", (), "cannot be imported"),
    (f"{HERE}:NoSuchClass.method", (), "NoSuchClass"),
    (f"{HERE}:Target.no_such_attr", (), "no_such_attr"),
    (f"{HERE}:Target.method", ("self", "x", "renamed_param"), "renamed_param"),
]


@pytest.mark.parametrize("target,params,needle", BROKEN, ids=["module", "class", "attr", "signature"])
def test_missing_target_fails_whole_set(reg, target, params, needle):
    good_orig = Target.__dict__["smethod"]
    method_orig = Target.__dict__["method"]
    specs = [HookSpec(f"{HERE}:Target.smethod", "before", lambda *a: None),  # valid, listed first
             HookSpec(target, "before", lambda *a, **k: None, params=params)]
    with pytest.raises(PatchTargetError) as info:
        reg.apply(specs)
    msg = str(info.value)
    assert target in msg and needle in msg
    assert installed_sglang_version() == sglang_under_test()
    assert f"sglang {sglang_under_test()}" in msg
    assert "\n" not in msg
    assert Target.__dict__["smethod"] is good_orig and not hooks.is_patched(good_orig)
    assert Target.__dict__["method"] is method_orig
    assert reg.applied == []


def test_var_keyword_target_accepts_any_param(reg):
    def loose(self, **kwargs):
        return kwargs

    monkey = type("Loose", (), {"loose": loose})
    mod = sys.modules[HERE]
    mod.Loose = monkey
    try:
        reg.apply([HookSpec(f"{HERE}:Loose.loose", "before", lambda *a, **k: None, params=("anything",))])
        assert hooks.is_patched(monkey.__dict__["loose"])
    finally:
        reg.undo()
        del mod.Loose


# ---------------------------------------------------------------- the real catalogue on real SGLang

W2 = "sglang.srt.speculative.eagle_worker_v2"
EXPECTED = {
    "marker": [("sglang.srt.managers.scheduler", "Scheduler", "get_internal_state"),
               ("sglang.srt.managers.scheduler", "Scheduler", "set_internal_state")],
    "timing": [(W2, "EAGLEWorkerV2", "forward_batch_generation"), (W2, "EAGLEWorkerV2", "verify"),
               (W2, "EagleDraftWorker", "draft"), (W2, "EagleDraftWorker", "_draft_extend_for_decode"),
               (W2, "EagleDraftWorker", "_draft_extend_for_prefill"),
               ("sglang.srt.managers.scheduler_components.batch_result_processor",
                "SchedulerBatchResultProcessor", "_resolve_spec_v2_tokens")],
    "checks": [(W2, "EagleDraftWorker", "init_attention_backends"),
               (W2, "EagleDraftWorker", "_draft_extend_for_decode"),
               (W2, "EagleDraftWorker", "_draft_extend_for_prefill")],
}


@pytest.fixture(scope="module")
def real_classes():
    """Import the real SGLang classes once (about 10 s on CPU) and remember their originals."""
    import importlib

    out = {}
    for targets in EXPECTED.values():
        for mod, cls, attr in targets:
            klass = getattr(importlib.import_module(mod), cls)
            out[(mod, cls, attr)] = (klass, klass.__dict__[attr])
    return out


@pytest.fixture
def overlay(real_classes):
    from sglang_patches.server.patches import catalog

    assert catalog._applied_in_process == []
    yield catalog
    catalog.undo_overlay()  # even when the test failed half-way
    _assert_all_original(real_classes)


def _assert_all_original(real_classes):
    for (mod, cls, attr), (klass, original) in real_classes.items():
        assert klass.__dict__[attr] is original, f"{cls}.{attr} not restored"
        assert not hooks.is_patched(klass.__dict__[attr])


def test_apply_overlay_on_real_classes_idempotent_and_undo(overlay, real_classes):
    from sglang.srt.speculative.eagle_worker_v2 import EagleDraftWorker, EAGLEWorkerV2

    applied = overlay.apply_overlay(OverlayConfig())
    assert len(applied) == 11
    for key, (klass, original) in real_classes.items():
        patched = klass.__dict__[key[2]]
        assert hooks.is_patched(patched), key
        assert patched is not original
        assert inspect.unwrap(patched) is original  # through one or two stacked wrappers
    # stacked: checks (applied last) wraps timing, which wraps SGLang's function
    for attr in ("_draft_extend_for_decode", "_draft_extend_for_prefill"):
        outer = EagleDraftWorker.__dict__[attr]
        assert getattr(outer, hooks.MARK).feature == "checks"
        assert getattr(outer.__wrapped__, hooks.MARK).feature == "timing"
        assert outer.__wrapped__.__wrapped__ is real_classes[(W2, "EagleDraftWorker", attr)][1]
    fbg = EAGLEWorkerV2.__dict__["forward_batch_generation"]
    assert fbg.__wrapped__ is real_classes[(W2, "EAGLEWorkerV2", "forward_batch_generation")][1]

    again = overlay.apply_overlay(OverlayConfig())
    assert again == applied and len(again) == 11 and len(overlay._applied_in_process) == 11
    assert EAGLEWorkerV2.__dict__["forward_batch_generation"] is fbg  # not wrapped twice

    assert overlay.undo_overlay() == 11
    _assert_all_original(real_classes)
    assert overlay.undo_overlay() == 0


@pytest.mark.parametrize("text", ["marker", "timing", "checks", "all,-checks", "timing,checks", "none"])
def test_feature_subsets(overlay, real_classes, text):
    features = parse_patch_list(text)
    applied = overlay.apply_overlay(OverlayConfig(patches=features))
    want = {t for f in features for t in EXPECTED[f]}
    assert len(applied) == sum(len(EXPECTED[f]) for f in features)
    for key, (klass, original) in real_classes.items():
        assert hooks.is_patched(klass.__dict__[key[2]]) == (key in want), key
    assert {h.spec.feature for h in applied} == set(features)
    overlay.undo_overlay()
    _assert_all_original(real_classes)
