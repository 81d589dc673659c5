"""Preflight checks. Each rule returns `Finding`s with a stable code, the numbers, and the exact fix.

Mirrors SGLang 0.5.17 (read from its source, not guessed):
- target capture (`models/llama.py` `set_eagle3_layers_to_capture`): only with EAGLE3; layer ids from
  the drafter's `eagle_config.eagle_aux_hidden_state_layer_ids`; none -> capture indices
  `[2, L//2, L-3]`; given -> `id+1` (DeepSeek-family targets keep ids as-is unless ids[0] == 1).
  Layer i's *input* is captured only for i < L, so a capture index >= L is silently dropped.
- drafter `LlamaForCausalLMEagle3` (`models/llama_eagle3.py`): `fc = Linear(H_in * n, H_draft)` with
  `H_in = target_hidden_size or hidden_size` and `n = num_aux_hidden_states`, else the number of
  eagle_config ids, else 3. fc runs only when the incoming width differs from the embedding width.
- `d2t` (draft->target id offsets, length draft_vocab_size) becomes `hot_token_id`; draft logits have
  `draft_vocab_size` columns.
- `speculative_hook._handle_eagle_family`: steps/topk/draft tokens are auto-chosen only when all are
  unset; topk == 1 forces draft tokens = steps + 1. `eagle_utils.organize_draft_results` takes
  `topk(draft_tokens - 1)` over `topk + (steps - 1) * topk**2` candidates.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

from sglang_patches.vocab.capture import capture_indices as sglang_capture_indices
from sglang_patches.vocab.findings import ERROR, WARNING, Finding
from sglang_patches.vocab.hidden_state import HiddenStateNumbers, hidden_state_findings
from sglang_patches.vocab.spec_params import sp008_spec_params
from sglang_patches.offline.preflight.model_info import NESTED_TEXT_KEYS as NESTED, ModelInfo
from sglang_patches.offline.preflight.safetensors_header import TensorInfo, find_tensor

MLA_HEAD = "Eagle3DeepseekV2ForCausalLM"  # SGLang's Kimi-K2.5 MLA EAGLE-3 head (models/kimi_k25_eagle3.py)

def draft_is_dummy(load_format: str | None, draft_load_format: str | None) -> bool:
    """SGLang builds the drafter with random weights: its draft load format falls back to
    --load-format (speculative/draft_worker_common.py), and the dummy loader opens no weight file."""
    return (draft_load_format or load_format or "").lower() == "dummy"


@dataclass(frozen=True)
class Inputs:
    target: ModelInfo
    draft: ModelInfo
    algorithm: str  # upper-cased as given; NEXTN is an alias of EAGLE
    tensors: dict[str, TensorInfo] | None  # drafter checkpoint shapes; None: no safetensors and no readable .bin
    steps: int | None = None
    topk: int | None = None
    draft_tokens: int | None = None
    # from a pasted serve command (None: not given); SGLang's fallbacks are applied in the rules
    load_format: str | None = None
    draft_load_format: str | None = None
    quantization: str | None = None
    draft_quantization: str | None = None
    weights_unread: str | None = None  # why weight files that exist were not read (a legacy-format .bin)

    @property
    def draft_dummy(self) -> bool:
        return draft_is_dummy(self.load_format, self.draft_load_format)

    @property
    def fc(self) -> TensorInfo | None:
        hit = find_tensor(self.tensors or {}, "fc.weight")
        return hit[1] if hit and len(hit[1].shape) == 2 else None

    @property
    def fc_is_eagle3(self) -> bool:
        """An fc weight is EAGLE-3 evidence, except the EAGLE-1/2 head's fc = Linear(2H, H, bias=True)
        (`models/llama_eagle.py`), recognised by an Eagle (not Eagle3) architecture or by that exact shape
        with a bias and no other EAGLE-3 sign in config.json."""
        if self.fc is None:
            return False
        d = self.draft
        if any("eagle" in a.lower() and "eagle3" not in a.lower() for a in d.architectures):
            return False
        eagle12 = self.fc.shape == (d.hidden_size, 2 * d.hidden_size) and find_tensor(self.tensors, "fc.bias")
        return not (eagle12 and not d.looks_eagle3(False))

    @property
    def eagle3(self) -> bool:
        return self.draft.looks_eagle3(self.fc_is_eagle3)

    @property
    def hidden_in(self) -> int:
        return self.draft.target_hidden_size or self.draft.hidden_size

    @property
    def num_aux_draft(self) -> int:
        """n in the drafter's fc = Linear(H_in * n, H) (llama_eagle3.LlamaModel)."""
        d = self.draft
        ids = d.aux_layer_ids
        if ids is None and MLA_HEAD in d.architectures:  # kimi_k25_eagle3: eagle_config's ids, else the top level's
            ids = d.toplevel_aux_layer_ids
        return d.num_aux_hidden_states or (len(ids) if ids else 3)

    @property
    def fc_in(self) -> int:
        return self.fc.shape[1] if self.fc else self.hidden_in * self.num_aux_draft


def capture_indices(target: ModelInfo, ids: tuple[int, ...] | None) -> list[int]:
    """SGLang's `layers_to_capture` for the target: the layers whose *input* is captured
    (the per-class rule: vocab/capture.py)."""
    return sglang_capture_indices(target.architectures, target.num_hidden_layers, ids)


def _layers_desc(inp: Inputs) -> str:
    ids = inp.draft.aux_layer_ids
    if ids is None:
        return f"SGLang's default layers {capture_indices(inp.target, None)}"
    L = inp.target.num_hidden_layers
    kept = [i for i, c in zip(ids, capture_indices(inp.target, ids)) if i >= 0 and 0 <= c < L]
    if len(kept) < len(ids):  # the count beside it is of the captured ones: name only those
        return f"layers {kept} of the listed {list(ids)}"
    return f"layers {list(ids)}"


def hidden_state_numbers(inp: Inputs) -> HiddenStateNumbers:
    """The numbers of the shared hidden-state rule set (vocab/hidden_state.py), from the configs
    and the checkpoint headers."""
    d, t = inp.draft, inp.target
    capture = inp.algorithm == "EAGLE3" and d.use_aux_hidden_state
    L = t.num_hidden_layers
    captured = {c for c in capture_indices(t, d.aux_layer_ids) if 0 <= c < L} if capture else set()
    built_from = "num_aux_hidden_states" if d.num_aux_hidden_states else (
        "the eagle_config layer ids" if d.aux_layer_ids else "SGLang's default of 3")
    return HiddenStateNumbers(
        algorithm=inp.algorithm, drafter=d.arch, drafter_eagle3=inp.eagle3,
        eagle3_evidence=tuple(d.eagle3_evidence(inp.fc_is_eagle3)),
        fc_in=inp.fc_in, fc_out=inp.fc.shape[0] if inp.fc else None,
        draft_hidden=d.hidden_size, target_hidden=t.hidden_size, hidden_in=inp.hidden_in,
        drafter_aux=inp.num_aux_draft, aux_capture=capture, captured=len(captured),
        layers_desc=_layers_desc(inp), layer_ids_given=d.aux_layer_ids is not None,
        listed_layers=len(d.aux_layer_ids) if capture and d.aux_layer_ids else 0,
        drafter_config=f"{d.path}/config.json",
        built_fc_in=inp.hidden_in * inp.num_aux_draft, built_from=built_from,
        checkpoint_has_fc=None if not inp.tensors else inp.fc is not None)


def sp001_sp004_hidden_state(inp: Inputs) -> list[Finding]:
    return hidden_state_findings(hidden_state_numbers(inp))


def sp005_aux_layer_ids(inp: Inputs) -> list[Finding]:
    if not inp.eagle3:
        return []
    d, t, L = inp.draft, inp.target, inp.target.num_hidden_layers
    cfg = f"{d.path}/config.json"
    if not d.use_aux_hidden_state:
        return []  # the target captures nothing: the shared hidden-state rules report it (SP005)
    ids = d.aux_layer_ids
    if ids is None:
        if d.toplevel_aux_layer_ids is not None:
            return [Finding("SP005", WARNING,
                            f"drafter lists eagle_aux_hidden_state_layer_ids {list(d.toplevel_aux_layer_ids)} at "
                            "the top level; the SGLang target reads only eagle_config.eagle_aux_hidden_state_layer_ids "
                            f"and captures its default layers {capture_indices(t, None)} instead",
                            f"move the list into eagle_config.eagle_aux_hidden_state_layer_ids in {cfg}")]
        return []
    if not ids:
        return [Finding("SP005", ERROR,
                        "eagle_config.eagle_aux_hidden_state_layer_ids is empty: the target captures nothing",
                        f"list the aux layer ids the drafter was trained on in {cfg}")]
    out = []
    captured = capture_indices(t, ids)
    missing, negative = [c for c in captured if c < 0 or c >= L], [i for i in ids if i < 0]
    if missing or negative:
        shifted = captured == [i + 1 for i in ids]  # Llama: always; the DeepSeek rule: when the list starts at 1
        out.append(Finding("SP005", ERROR,
            f"aux layer ids {list(ids)}: SGLang captures the input of layers {captured} "
            f"({'each id + 1' if shifted else 'each id as given'} for {t.arch}); it has layers 0..{L - 1}, so "
            + "; ".join([f"layer{'s' * (len(missing) > 1)} {', '.join(map(str, missing))} "
                         f"{'are' if len(missing) > 1 else 'is'} never captured"] * bool(missing)
                        + [f"negative id{'s' * (len(negative) > 1)} {', '.join(map(str, negative))} name"
                           f"{'' if len(negative) > 1 else 's'} no layer"] * bool(negative)),
            f"use a drafter trained for this target, or fix eagle_config.eagle_aux_hidden_state_layer_ids in {cfg} "
            f"(ids up to {L - 2 if shifted else L - 1} here)"))
    if len(set(ids)) != len(ids):
        out.append(Finding("SP005", ERROR,
            f"aux layer ids {list(ids)} contain duplicates; SGLang captures each layer once, so the target "
            f"sends fewer than {len(ids)} states",
            f"fix eagle_config.eagle_aux_hidden_state_layer_ids in {cfg}"))
    return out


def sp006_hidden_size(inp: Inputs) -> list[Finding]:
    d, H = inp.draft, inp.target.hidden_size
    if inp.eagle3:
        if inp.hidden_in == H:
            return []
        src = "its target_hidden_size" if d.target_hidden_size else "its hidden_size; no target_hidden_size"
        return [Finding("SP006", ERROR,
            f"drafter expects target hidden width {inp.hidden_in} ({src}) but target {inp.target.arch} has "
            f"hidden_size {H}",
            "use a drafter trained for this target" + (
                f", or set target_hidden_size: {H} in {d.path}/config.json if only the config is wrong"
                if d.target_hidden_size is None else ""))]
    if d.hidden_size == H:
        return []
    return [Finding("SP006", ERROR,
        f"drafter hidden_size {d.hidden_size} != target hidden_size {H}; an EAGLE/EAGLE-2 drafter takes "
        "the target's final hidden states directly",
        "use a drafter trained for this target")]


def sp007_vocab(inp: Inputs) -> list[Finding]:
    d, tv = inp.draft, inp.target.vocab_size
    out, cfg = [], f"{inp.draft.path}/config.json"
    if tv is not None and d.vocab_size is not None and d.vocab_size != tv:
        # smaller: the drafter cannot embed the target's high token ids it is fed; larger: usually a
        # padded embedding whose extra rows are never fed (a different tokenizer shows up in acceptance)
        sev = ERROR if d.vocab_size < tv else WARNING
        out.append(Finding("SP007", sev,
                           f"drafter vocab_size {d.vocab_size} != target vocab_size {tv}",
                           "use a drafter trained with the target's tokenizer"))
    if not inp.eagle3:
        return out
    dv = d.draft_vocab_size
    head_rows = dv if dv is not None else d.vocab_size
    if tv is not None and dv is not None and dv > tv:
        out.append(Finding("SP007", ERROR, f"draft_vocab_size {dv} > target vocab_size {tv}",
                           f"fix draft_vocab_size in {cfg}"))
    if inp.tensors:
        hit = find_tensor(inp.tensors, "d2t") or next(
            ((n, i) for n, i in inp.tensors.items() if "d2t" in n), None)
        reduced = dv is not None and tv is not None and dv < tv
        if reduced and hit is None:
            out.append(Finding("SP007", ERROR,
                f"reduced draft vocabulary (draft_vocab_size {dv} < target vocab_size {tv}) but the checkpoint "
                f"has no d2t tensor: SGLang would read draft ids 0..{dv - 1} as target ids 0..{dv - 1}",
                "use the complete EAGLE-3 checkpoint (with its d2t tensor)"))
        elif hit is not None and dv is not None and hit[1].shape != (dv,):
            out.append(Finding("SP007", ERROR,
                f"{hit[0]} has shape {list(hit[1].shape)}, expected [{dv}] (draft_vocab_size)",
                f"fix draft_vocab_size in {cfg} or use a matching checkpoint"))
        head = find_tensor(inp.tensors, "lm_head.weight")
        if head and not d.tie_word_embeddings and head_rows is not None and head[1].shape[0] != head_rows:
            out.append(Finding("SP007", ERROR,
                f"drafter {head[0]} has {head[1].shape[0]} rows but config.json gives draft vocab {head_rows} "
                f"({'draft_vocab_size' if dv is not None else 'vocab_size'}); weight loading fails on the shape",
                f"fix draft_vocab_size in {cfg}"))
    return out


def sp010_dummy_drafter(inp: Inputs) -> list[Finding]:
    """The drafter's weights are random: SGLang's draft load format falls back to --load-format."""
    if not inp.draft_dummy:
        return []
    flag = ("--speculative-draft-load-format dummy" if inp.draft_load_format else
            "--load-format dummy, which the drafter inherits")
    from sglang_patches.offline.preflight.command import dummy_fixture

    name = dummy_fixture(inp.target.path, inp.draft.path)
    if name is not None:  # the launcher serves it so: a fixture has no real weights to load instead
        return [Finding("SP010", WARNING,
            f"the drafter is the dummy-weight fixture {name}, served with random weights ({flag}): it accepts "
            "nothing (accept length about 1.0) and speculation is slower than plain decode; fine for timing costs, "
            "never for speed",
            "for real acceptance serve a trained fixture (--fixture trained or trained-8b), or your own pair"
            if "Llama" in inp.target.arch else  # the trained fixtures are Llama 1B and 8B: no stand-in for this shape
            "for real acceptance serve your own trained pair (the trained fixtures are Llama-shaped); to time this "
            "shape at a given acceptance, add --simulate-acceptance 0.8,0.7,0.6 (benchmark only)")]
    return [Finding("SP010", WARNING,
        f"the drafter is loaded with dummy (random) weights ({flag}): it accepts nothing (accept length "
        "about 1.0) and speculation is slower than plain decode; fine for timing costs, never for speed",
        "load the drafter's real weights: drop --load-format dummy, or pass --speculative-draft-load-format auto "
        + ("(a dummy-weight fixture has none: the trained fixtures, trained and trained-8b, accept for real)"
           if "Llama" in inp.target.arch else "(a dummy-weight fixture has none: to time this shape at a given "
           "acceptance, add --simulate-acceptance 0.8,0.7,0.6)"))]


def _quant(info: ModelInfo) -> tuple[str, str] | None:
    """(method, where) of a checkpoint's quantization_config: top level, else a wrapper's text model
    (Kimi-K2.5 keeps it in text_config; SGLang's KimiK25Config lifts it from there)."""
    raw = info.raw if isinstance(info.raw, dict) else {}
    for where, part in [("", raw)] + [(f"{k}.", raw[k]) for k in NESTED if isinstance(raw.get(k), dict)]:
        q = part.get("quantization_config")
        if isinstance(q, dict):
            return str(q.get("quant_method") or q.get("quant_type") or "quantised"), f"{where}quantization_config"
    return None


def sp011_quantised_target(inp: Inputs) -> list[Finding]:
    """A quantised target with a drafter at another precision: hidden states it was not trained on.
    SGLang's drafter takes --speculative-draft-model-quantization, else the target's --quantization
    (server_args: `unquant` turns either off)."""
    if inp.quantization == "unquant":
        return []
    found = _quant(inp.target)
    target_q = inp.quantization or (found[0] if found else None)
    if not target_q:
        return []
    if inp.draft_quantization:
        draft_q = None if inp.draft_quantization == "unquant" else inp.draft_quantization
    elif inp.quantization:
        return [Finding("SP011", WARNING,
            f"the drafter inherits --quantization {target_q} from the target (no --speculative-draft-model-"
            "quantization): a drafter trained in bf16 may accept much less when quantised",
            "check the drafter's model card; pass --speculative-draft-model-quantization unquant to keep it in "
            "its trained precision")]
    else:
        draft_q = (_quant(inp.draft) or (None,))[0]
    if draft_q == target_q:
        return []
    source = "--quantization" if inp.quantization else f"its config.json {found[1]}"
    return [Finding("SP011", WARNING,
        f"the target is quantised ({target_q}, {source}) and the drafter is "
        f"{'at ' + draft_q if draft_q else 'not (bf16/fp16)'}: a drafter trained on the unquantised target's "
        "hidden states may accept much less on the quantised ones",
        "check that the drafter's model card names this quantised target; else use a drafter trained for it")]


HEAD_ENDINGS = ("eagle", "eagle3", "mtp", "nextn")  # SGLang's draft-head classes: LlamaForCausalLMEagle3, ...NextN
MTP_KEYS = ("num_nextn_predict_layers", "mtp_num_hidden_layers", "num_mtp_layers")


def _head_arch(info: ModelInfo) -> str | None:
    """The architecture that marks a one- or two-layer speculative head: a name ending in Eagle, Eagle3,
    MTP or NextN, or starting with Eagle3 (Eagle3DeepseekV2ForCausalLM), on a model of at most 2 layers
    (NVIDIA's Eagle2_5_VL... is a 28-layer vision-language model, not a head)."""
    if info.num_hidden_layers > 2:
        return None
    return next((a for a in info.architectures
                 if a.lower().endswith(HEAD_ENDINGS) or a.lower().startswith("eagle3")), None)


def _has_mtp(info: ModelInfo) -> bool:
    """MTP layers in the checkpoint (its own drafter under NEXTN / EAGLE): a key at the top level or in
    the nested text config of a multimodal model (SGLang sets some of them itself at draft load)."""
    raw = info.raw if isinstance(info.raw, dict) else {}
    scopes = [raw] + [raw[k] for k in NESTED if isinstance(raw.get(k), dict)]
    return any(scope.get(key) for scope in scopes for key in MTP_KEYS)


def sp012_roles(inp: Inputs) -> list[Finding]:
    """The two paths in the wrong places. A target that is a draft head cannot serve (SGLang loads it as
    the target, and the hidden-state rules then compare the head with the model): an error. Under EAGLE
    / EAGLE3, a drafter that is a whole model (no head architecture, no EAGLE-3 sign, no MTP layers, at
    least as deep as the target) drafts at a target forward per token: a warning. A checkpoint that is its
    own drafter (the same path: MTP) and other algorithms (STANDALONE: a smaller model of any depth) are
    left alone."""
    out, t, d = [], inp.target, inp.draft
    head = _head_arch(t)
    if head is not None:
        out.append(Finding("SP012", ERROR,
            f"the target {t.path} is a speculative draft head (architecture {head}, {t.num_hidden_layers} "
            "layer(s)), not a model SGLang can serve as the target",
            ("the two look swapped: the full model goes in --model-path, the head in --speculative-draft-model-path"
             if _head_arch(d) is None and not inp.eagle3 else
             "pass the full model as --model-path and the head as --speculative-draft-model-path")))
    same = os.path.realpath(str(t.path)) == os.path.realpath(str(d.path))
    if (head is None and not same and inp.algorithm in ("EAGLE", "EAGLE3") and _head_arch(d) is None
            and not inp.eagle3 and not _has_mtp(d) and d.num_hidden_layers > 2
            and d.num_hidden_layers >= t.num_hidden_layers):
        deeper = d.num_hidden_layers > t.num_hidden_layers
        depth = f"more than the target's {t.num_hidden_layers}" if deeper else "as many as the target"
        out.append(Finding("SP012", WARNING,
            f"the drafter {d.path} is a whole model ({d.arch}, {d.num_hidden_layers} layers, {depth}): each draft "
            "token would cost at least a target forward, so speculation cannot pay",
            "pass the EAGLE / EAGLE-3 head trained for this target as --speculative-draft-model-path"
            + (" (are --model-path and the drafter swapped?)" if deeper else "")))
    return out


RULES: list[Callable[[Inputs], list[Finding]]] = [
    sp012_roles,  # first: with the paths swapped the other findings compare the wrong files
    sp001_sp004_hidden_state, sp005_aux_layer_ids, sp006_hidden_size, sp007_vocab, sp008_spec_params,
    sp010_dummy_drafter, sp011_quantised_target]

CODES = {
    "SP001": "EAGLE-3 drafter with --speculative-algorithm other than EAGLE3 (fc silently skipped)",
    "SP002": "--speculative-algorithm EAGLE3 with a drafter that is not EAGLE-3 (no fc)",
    "SP003": "fc input width != target hidden x number of captured aux layers (or != config.json)",
    "SP004": "fc output width != drafter hidden_size",
    "SP005": "aux layer ids outside the target's layers, empty, duplicated, or capture disabled",
    "SP006": "drafter's expected target hidden width != target hidden_size",
    "SP007": "vocabulary mismatch: vocab_size, draft_vocab_size, d2t, lm_head rows",
    "SP008": "steps / topk / draft tokens invalid for SGLang",
    "SP009": "drafter has no safetensors and no readable .bin: checkpoint-shape checks skipped (warning; not with "
             "dummy weights)",
    "SP010": "drafter loaded with dummy (random) weights: it accepts nothing (warning)",
    "SP011": "quantised target with a drafter at another precision (warning)",
    "SP012": "target is a draft head (swapped paths); drafter is a whole model (warning)",
}


def run_rules(inp: Inputs) -> list[Finding]:
    findings = [f for rule in RULES for f in rule(inp)]
    if any(f.code == "SP012" and f.fix.startswith("the two look swapped") for f in findings):
        return [f for f in findings if f.code == "SP012"]  # the rest would compare the wrong files
    if inp.tensors is None and not inp.draft_dummy and inp.weights_unread:  # dummy weights: no file is read
        findings.append(Finding("SP009", WARNING,
            f"drafter {inp.draft.path}: {inp.weights_unread}; fc/d2t/lm_head shapes were not checked",
            "re-save it with torch.save (torch 1.6 or later writes the zip format) or convert it to safetensors"))
    elif inp.tensors is None and not inp.draft_dummy:
        findings.append(Finding("SP009", WARNING,
            f"drafter {inp.draft.path} has no .safetensors or .bin weight files; fc/d2t/lm_head shapes were not "
            "checked",
            "download the drafter's weight files beside its config.json to check their shapes"))
    return findings
