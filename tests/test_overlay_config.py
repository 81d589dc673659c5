"""OverlayConfig type- and range-checks every field: from SGLANG_PATCHES_CONFIG, from the launcher's
flags and from Python. A JSON "no" for a bool is truthy; accepted, it would switch a check off."""
from __future__ import annotations

import dataclasses
import json

import pytest

from sglang_patches.errors import UserError
from sglang_patches.vocab.overlay_config import ENV_VAR, FIELD_RULES, OverlayConfig

# field -> (values that must be accepted, values that must be refused)
CASES = {
    "patches": ([[], ["timing"], ["marker", "timing", "checks", "triton_draft"]],
                ["timing", [1], ["bogus"], {"timing": True}, None]),
    "timing_log": ([None, "c.jsonl", "/tmp/x/cycles.jsonl"], [42, "", "   ", ["a"], True, "a\0b"]),
    "timing_log_max_mb": ([0.5, 1, 256.0, 1048576], [-1, 0, "big", True, None, 1e300, [1]]),
    "timing_log_backups": ([0, 3, 1000], [-1, 1.5, "3", True, None, 1001]),
    "timing_all_ranks": ([True, False], ["no", "yes", 0, 1, None, "false"]),
    "timing_summary_interval": ([0, 1, 500], [-1, 2.5, "500", False, None]),
    "timing_ring_size": ([1, 4096, 1 << 24], ["big", 0, -5, 4096.0, True, None, (1 << 24) + 1]),
    "allow_hidden_state_mismatch": ([True, False], ["no", "false", 0, 1, None, [], "yes"]),
    "draft_tp_size": ([None, 1, 4], [0, -1, 1.0, "1", True]),
    "draft_backend": (["sglang", "triton"], ["SGLANG", "cuda", 1, None, ""]),
    "draft_backend_fallback": ([True, False], ["no", 1, 0, None]),
    "draft_weights": (["bf16"], ["FP8", "int8", 8, None, ""]),  # "fp8" needs triton_draft: test_draft_weights_fp8.py
    "simulate_acceptance": ([None, [0.8, 0.5], [1, 0]], ["0.8", [], [1.5], [-0.1], ["0.5"], [True], [0.5] * 17, 0.5]),
    "accept_collapse_window": ([1, 256], [0, -1, 2.0, "256", True, None]),
    "accept_collapse_threshold": ([None, 1.1, 2], [1, 0.5, "1.1", True, -3]),
    "on_accept_collapse": (["warn", "exit", "off"], ["stop", "", None, 1, "WARN"]),
}


def test_every_field_has_a_rule_and_cases():
    names = {f.name for f in dataclasses.fields(OverlayConfig)}
    assert names == set(FIELD_RULES), "each OverlayConfig field needs a FIELD_RULES entry"
    assert names == set(CASES), "each OverlayConfig field needs accepted/refused cases here"


@pytest.mark.parametrize("field", sorted(CASES))
def test_field_refused_from_env_json(field):
    for bad in CASES[field][1]:
        text = json.dumps({field: bad})
        with pytest.raises(UserError) as info:
            OverlayConfig.from_json(text)
        msg = str(info.value)
        assert ENV_VAR in msg and repr(field) in msg and "\n" not in msg, (field, bad, msg)
        assert info.value.code == 2


@pytest.mark.parametrize("field", sorted(CASES))
def test_field_accepted_from_env_json_and_round_trips(field):
    for good in CASES[field][0]:
        cfg = OverlayConfig.from_json(json.dumps({field: good}))
        assert OverlayConfig.from_json(cfg.to_env()) == cfg
        if field != "patches":
            assert getattr(cfg, field) == good


@pytest.mark.parametrize("field", sorted(f for f in CASES if f != "patches"))
def test_field_refused_from_python(field):
    for bad in CASES[field][1]:
        with pytest.raises(UserError, match=repr(field)):
            OverlayConfig(**{field: bad})


def test_the_issue_examples():
    for text in ('{"allow_hidden_state_mismatch": "no"}', '{"timing_ring_size": "big"}',
                 '{"timing_log": 42}', '{"timing_log_max_mb": -1}', '{"timing_log_max_mb": NaN}',
                 '{"timing_log_max_mb": Infinity}'):
        with pytest.raises(UserError):
            OverlayConfig.from_json(text)


def test_deeply_nested_json_is_one_line_error():
    with pytest.raises(UserError, match="nested too deeply"):
        OverlayConfig.from_json("[" * 200_000 + "]" * 200_000)
