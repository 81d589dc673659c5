"""replicas.plan_k: the decision both versions' _plan make before EagleDraftWorker.__init__ runs
(draft on K, the stock drafter, or a one-line refusal), for the branches the multi-rank tests
(test_draft_tp_ranks.py: K = N, a refused algorithm, a K that does not divide N) do not reach.

`par` and `sizes` are stand-ins (mock) for get_parallel() and ParallelSizes: the real get_parallel()
needs initialised process groups; they carry only the fields plan_k reads. The "already patched"
check reads the real _TP_STATE_PATCHED of the installed SGLang's parallel_state."""
import types

import pytest

from sglang_patches import compat
from sglang_patches.server.draft_tp import replicas

ARGS = types.SimpleNamespace(speculative_algorithm="eagle3")  # lower case: plan_k upper-cases it


def _par(tp=4, attn_tp=4):
    return types.SimpleNamespace(tp_size=tp, attn_tp_size=attn_tp)


def _sizes(pp=1, ep=1, cp=1):
    return types.SimpleNamespace(pp_size=pp, moe_ep_size=ep, attn_cp_size=cp)


def _refusal(**kw) -> str:
    k, par, sizes, dp = kw.pop("k", 2), kw.pop("par", _par()), kw.pop("sizes", _sizes()), kw.pop("dp", False)
    with pytest.raises(RuntimeError) as exc:
        replicas.plan_k(ARGS, k, par, sizes, dp_attention=dp)
    msg = str(exc.value)
    assert msg.startswith("sglang_patches draft_tp: ") and "\n" not in msg
    return msg


def test_k_below_n_drafts_on_k_and_k_equal_n_is_stock():
    assert replicas.plan_k(ARGS, 2, _par(), _sizes(), dp_attention=False) is True
    assert replicas.plan_k(ARGS, 1, _par(), _sizes(), dp_attention=False) is True
    assert replicas.plan_k(ARGS, 4, _par(), _sizes(), dp_attention=False) is False


def test_dp_attention_is_stock_at_the_attention_tp_size_and_refused_otherwise():
    assert replicas.plan_k(ARGS, 2, _par(attn_tp=2), _sizes(), dp_attention=True) is False
    assert "--draft-tp-size 1 with --enable-dp-attention (attention TP 2)" in _refusal(k=1, par=_par(attn_tp=2),
                                                                                       dp=True)


@pytest.mark.parametrize("sizes,words", [(_sizes(pp=2), "--pp-size 2"), (_sizes(ep=2), "expert/context"),
                                         (_sizes(cp=2), "expert/context")])
def test_pipeline_expert_and_context_parallel_targets_are_refused(sizes, words):
    assert words in _refusal(sizes=sizes)


def test_an_already_patched_tp_group_is_refused(monkeypatch):
    contact = compat.current().TP_STATE_PATCHED
    assert contact.resolve() is False  # the real global, as a fresh process has it
    monkeypatch.setattr(contact.owner(), contact.name, True)
    assert "already patched" in _refusal()
