"""Function-preserving inflation (offline/fixtures/inflate.py), the code path of the `trained-8b` fixture.

A small random Llama (through the real `transformers` LlamaForCausalLM) and a random EAGLE-3 drafter
(through `Eagle3Drafter`, the reference whose checkpoints load into SGLang's LlamaForCausalLMEagle3,
tests/test_fixtures_trainer.py) are inflated to wider and deeper shapes; logits must match in fp32.
Norm weights and eps are randomised / large so that every rescaling matters, and mutation tests
show that removing one breaks the match."""
from __future__ import annotations

import copy
import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from sglang_patches.offline.fixtures import inflate  # noqa: E402
from sglang_patches.offline.fixtures.specs import capture_layers, eagle3_drafter, llama_target  # noqa: E402
from sglang_patches.offline.fixtures.train_drafter import Eagle3Drafter  # noqa: E402

SRC = dict(hidden=64, layers=7, heads=4, kv_heads=2, intermediate=96, vocab=256, max_pos=256, rope_theta=10000.0)
# (hidden, layers, heads, kv_heads, intermediate): 4x wide (one replica, f = 1/4), 8x wide (two
# replicas, f = 1/4, as 512 -> 4096), and 240 wide (no exact replica count: sqrt scaling).
SHAPES = [(256, 16, 16, 4, 320), (512, 12, 32, 8, 200), (240, 9, 15, 3, 96)]
STEPS = 3


def _src_cfg():
    cfg = llama_target(**SRC)
    cfg["rms_norm_eps"] = 0.3  # large, so a wrong eps shows in fp32
    return cfg


def _shape(t):
    H, L, NH, NKV, I = t
    return {"hidden_size": H, "num_hidden_layers": L, "num_attention_heads": NH, "num_key_value_heads": NKV,
            "intermediate_size": I}


def _hf(cfg):
    from transformers import LlamaConfig, LlamaForCausalLM
    keep = {k: v for k, v in cfg.items() if k not in ("architectures", "torch_dtype", "transformers_version")}
    c = LlamaConfig(**keep)
    c._attn_implementation = "eager"
    return LlamaForCausalLM(c).float().eval()


def _randomise_norms(model, gen):
    with torch.no_grad():
        for n, p in model.named_parameters():
            if n.endswith("norm.weight"):
                p.copy_(0.5 + torch.rand(p.shape, generator=gen))


@pytest.fixture(scope="module")
def pair():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    tcfg = _src_cfg()
    target = _hf(tcfg)
    with torch.no_grad():  # a random-init Llama is nearly an identity map; give it real signal
        for p in target.parameters():
            if p.ndim == 2:
                p.normal_(0, 0.15, generator=gen)
    _randomise_norms(target, gen)
    dcfg = eagle3_drafter(tcfg)
    drafter = Eagle3Drafter(dcfg).float().eval()
    with torch.no_grad():
        for p in drafter.parameters():
            if p.ndim == 2:
                p.normal_(0, 0.15, generator=gen)
    _randomise_norms(drafter, gen)
    return tcfg, target, dcfg, drafter


def _inflate(pair, shape):
    tcfg, target, dcfg, drafter = pair
    plan = inflate.make_plan(tcfg, shape)
    new_t = inflate.inflated_config(tcfg, shape, plan)
    new_d = inflate.inflated_drafter_config(dcfg, new_t, plan)
    big = _hf(new_t)
    sd = dict(inflate.inflate_target(target.state_dict(), tcfg, shape, plan, seed=3))
    missing, unexpected = big.load_state_dict(sd, strict=False)
    assert not unexpected and all("rotary" in m for m in missing), (missing, unexpected)
    big_d = Eagle3Drafter(new_d).float().eval()
    big_d.load_state_dict(inflate.inflate_drafter(drafter.state_dict(), plan, shape), strict=True)
    return plan, new_t, big, big_d


def _outputs(cfg, target, drafter, ids):
    with torch.no_grad():
        out = target(input_ids=ids, output_hidden_states=True)
        aux = torch.cat([out.hidden_states[i] for i in capture_layers(cfg["num_hidden_layers"])], -1)
        T = ids.shape[1] - STEPS
        embed = target.get_input_embeddings().weight
        d = drafter.forward_ttt(aux[:, :T], ids[:, 1:], embed, STEPS)
    return out.logits, d


def _ids():
    return torch.randint(6, SRC["vocab"], (2, 24), generator=torch.Generator().manual_seed(7))


# fp32: the inflation is exact up to summation order. bf16 (what SGLang serves): both models round
# every activation to bf16, and the wider GEMMs sum the same products in another order, so logits
# agree only to bf16 resolution; the tolerance is relative to the logit scale.
TOL = {torch.float32: 1e-4, torch.bfloat16: 6e-2}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_inflated_pair_computes_the_same_logits(pair, shape, dtype):
    shape = _shape(shape)
    tcfg, target, dcfg, drafter = pair
    plan, new_t, big, big_d = _inflate(pair, shape)
    if dtype != torch.float32:  # copies: the module-scoped pair is shared with other tests
        target, drafter, big, big_d = (copy.deepcopy(m).to(dtype) for m in (target, drafter, big, big_d))
    ids = _ids()
    ref_logits, ref_draft = _outputs(tcfg, target, drafter, ids)
    logits, draft = _outputs(new_t, big, big_d, ids)
    assert logits.shape == ref_logits.shape
    scale = ref_logits.float().abs().max().item()
    tol = TOL[dtype] * max(1.0, scale) if dtype != torch.float32 else TOL[dtype]
    torch.testing.assert_close(logits.float(), ref_logits.float(), rtol=TOL[dtype], atol=tol)
    for got, want in zip(draft, ref_draft):
        torch.testing.assert_close(got.float(), want.float(), rtol=TOL[dtype], atol=tol)
    # the logits are not trivially equal: they vary over tokens
    assert ref_logits.float().std() > 0.1
    if dtype == torch.bfloat16:  # teacher-forced argmax agreement (the GPU check compares free-running outputs)
        agree = (logits.argmax(-1) == ref_logits.argmax(-1)).float().mean().item()
        assert agree >= 0.9, agree


def test_plan_for_the_trained_8b_shape():
    from sglang_patches.offline.fixtures.specs import get_spec
    src = get_spec("trained").target
    plan = inflate.make_plan(src, inflate.LLAMA8B_SHAPE)
    assert plan.copies == 2 and plan.norm_scale == 0.5  # exact in bf16
    assert plan.head_dim == 64
    # the residual entering inflated layer 2 / 16 / 29 (SGLang's default capture of 32 layers) has
    # passed exactly the original layers before 2 / 4 / 5 (the capture of 8 layers), the rest zero
    for src_id, new_id in zip(capture_layers(8), capture_layers(32)):
        assert sum(p < new_id for p in plan.layer_pos) == src_id
    assert capture_layers(32) == [2, 16, 29]
    # GQA: query heads 2g, 2g+1 of kv head g go to 4g, 4g+1 of kv head g
    assert plan.q_heads == [0, 1, 4, 5, 8, 9, 12, 13]


def test_extra_layers_add_zero_but_read_full_weights(pair):
    shape = _shape(SHAPES[0])
    tcfg, target, *_ = pair
    plan = inflate.make_plan(tcfg, shape)
    sd = dict(inflate.inflate_target(target.state_dict(), tcfg, shape, plan))
    extra = [j for j in range(shape["num_hidden_layers"]) if j not in plan.layer_pos]
    assert len(extra) == shape["num_hidden_layers"] - SRC["layers"]
    for j in extra:
        pre = f"model.layers.{j}."
        assert not sd[pre + "self_attn.o_proj.weight"].any() and not sd[pre + "mlp.down_proj.weight"].any()
        assert sd[pre + "self_attn.q_proj.weight"].abs().sum() > 0 and sd[pre + "mlp.gate_proj.weight"].abs().sum() > 0
        assert sd[pre + "mlp.gate_proj.weight"].shape == (shape["intermediate_size"], shape["hidden_size"])


@pytest.mark.parametrize("mutation", ["norm_weight", "eps", "replica", "head_map"])
def test_removing_one_rescaling_breaks_the_match(pair, monkeypatch, mutation):
    shape = _shape(SHAPES[1])  # two replicas, so the replica mutation applies
    if mutation == "norm_weight":
        monkeypatch.setattr(inflate, "_norm", lambda w, p: inflate._rep_rows(w, p))
    elif mutation == "eps":
        orig = inflate.inflated_config
        monkeypatch.setattr(inflate, "inflated_config",
                            lambda src, shp, plan: {**orig(src, shp, plan), "rms_norm_eps": src["rms_norm_eps"]})
    elif mutation == "replica":  # write one replica but keep the norm scaling of two
        real = inflate._rep_rows

        def one_copy(w, p):
            out = real(w, p)
            out[p.h:] = 0
            return out
        monkeypatch.setattr(inflate, "_rep_rows", one_copy)
    elif mutation == "head_map":  # query heads placed contiguously: wrong kv head for some
        real_plan = inflate.make_plan
        monkeypatch.setattr(inflate, "make_plan", lambda s, sh: inflate.InflatePlan(
            **{**real_plan(s, sh).__dict__, "q_heads": list(range(s["num_attention_heads"]))}))
    tcfg, target, dcfg, drafter = pair
    plan, new_t, big, big_d = _inflate(pair, shape)
    ids = _ids()
    ref_logits, _ = _outputs(tcfg, target, drafter, ids)
    logits, _ = _outputs(new_t, big, big_d, ids)
    assert not torch.allclose(logits, ref_logits, rtol=1e-4, atol=1e-4)


def test_inflate_pair_writes_sharded_checkpoints(pair, tmp_path):
    from safetensors.torch import load_file, save_file
    tcfg, target, dcfg, drafter = pair
    src_t, src_d = tmp_path / "t", tmp_path / "d"
    for d, cfg, model in ((src_t, tcfg, target), (src_d, dcfg, drafter)):
        d.mkdir()
        (d / "config.json").write_text(json.dumps(cfg))
        save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(d / "model.safetensors"))
    shape = _shape(SHAPES[0])
    info = inflate.inflate_pair(src_t, src_d, tmp_path / "T", tmp_path / "D", shape, shard_bytes=1 << 20,
                                log=lambda *_: None)
    assert info["target_shards"] > 1
    index = json.loads((tmp_path / "T" / "model.safetensors.index.json").read_text())
    files = sorted(set(index["weight_map"].values()))
    assert [f.name for f in sorted((tmp_path / "T").glob("*.safetensors"))] == files
    assert not list((tmp_path / "T").glob("*.part"))
    n = sum(len(load_file(str(tmp_path / "T" / f))) for f in files)
    assert n == len(index["weight_map"])
    cfg = json.loads((tmp_path / "T" / "config.json").read_text())
    assert cfg["hidden_size"] == 256 and cfg["rms_norm_eps"] == pytest.approx(0.3 / 4)
    dcfg2 = json.loads((tmp_path / "D" / "config.json").read_text())
    assert dcfg2["target_hidden_size"] == 256
    assert load_file(str(tmp_path / "D" / "model.safetensors"))["fc.weight"].shape == (256, 3 * 256)


def test_impossible_shapes_are_refused():
    src = _src_cfg()
    with pytest.raises(ValueError, match="head_dim"):
        inflate.make_plan(src, _shape((256, 16, 8, 4, 320)))  # head_dim 32 != 16
    with pytest.raises(ValueError, match="capture"):
        inflate.make_plan(src, _shape((256, 7, 16, 4, 320)) | {"num_hidden_layers": 5})


def test_trained_8b_refuses_short_disk(tmp_path, monkeypatch):
    """The disk check itself (a full disk cannot be produced here, so disk_usage is replaced)."""
    import collections
    import shutil

    from sglang_patches.offline import fixtures
    from sglang_patches.errors import UserError
    usage = collections.namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage(100 << 30, 99 << 30, 1 << 30))
    with pytest.raises(UserError, match=r"needs 16 GiB of free disk, .* has 1.0 GiB"):
        fixtures._require_inflate_resources("trained-8b", tmp_path / "new" / "dir")


def test_trained_8b_spec_is_the_trained_pair_inflated():
    from sglang_patches.offline.fixtures.specs import get_spec
    base, big = get_spec("trained"), get_spec("trained-8b")
    assert big.base == "trained" and big.load_format == "auto"
    t, d = big.target, big.draft
    assert (t["hidden_size"], t["num_hidden_layers"], t["intermediate_size"]) == (4096, 32, 14336)
    assert t["vocab_size"] == base.target["vocab_size"] and t["rope_theta"] == base.target["rope_theta"]
    assert t["rms_norm_eps"] == base.target["rms_norm_eps"] / 4 == d["rms_norm_eps"]
    assert d["target_hidden_size"] == 4096 and d["intermediate_size"] == 14336


def test_drafter_vocab_maps_stay_integers(pair, tmp_path):
    """d2t / t2d (reduced-vocabulary drafters) pass through exactly: only float tensors become bf16."""
    from safetensors.torch import load_file, save_file
    tcfg, target, dcfg, drafter = pair
    src_t, src_d = tmp_path / "t", tmp_path / "d"
    d2t = torch.tensor([0, 1000, 12345, 100001], dtype=torch.int64)
    for d, cfg, sd in ((src_t, tcfg, target.state_dict()), (src_d, dcfg, {**drafter.state_dict(), "d2t": d2t})):
        d.mkdir()
        (d / "config.json").write_text(json.dumps(cfg))
        save_file({k: v.contiguous() for k, v in sd.items()}, str(d / "model.safetensors"))
    inflate.inflate_pair(src_t, src_d, tmp_path / "T", tmp_path / "D", _shape(SHAPES[0]), log=lambda *_: None)
    out = load_file(str(tmp_path / "D" / "model.safetensors"))
    assert out["d2t"].dtype == torch.int64 and torch.equal(out["d2t"], d2t)
