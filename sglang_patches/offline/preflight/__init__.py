"""Preflight: check a target + drafter pair for EAGLE / EAGLE-3 hidden-state mismatches.

Reads only `config.json` files and the drafter's weight shapes: safetensors *headers*, or a `.bin`'s
pickle parsed for shapes only (torch_bin_header.py: nothing in it is run); imports no torch and no
SGLang, needs no GPU.

    from sglang_patches.offline.preflight import run_preflight
    result = run_preflight("/models/Llama-3.1-8B", "/models/EAGLE3-Llama-3.1-8B", "EAGLE")
    result.ok            # False: SP001
    print(result.format_text()); result.to_json()

Unusable input (missing directory, bad config.json, corrupt safetensors) raises
`sglang_patches.errors.UserError` (exit code 2 through the CLI).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from sglang_patches.errors import UserError
from sglang_patches.offline.preflight.model_info import ModelInfo, read_model_info
from sglang_patches.offline.preflight.rules import CODES, ERROR, WARNING, Finding, Inputs, draft_is_dummy, run_rules
from sglang_patches.offline.preflight.safetensors_header import SafetensorsHeaderError, checkpoint_files, read_checkpoint_headers
from sglang_patches.offline.preflight.torch_bin_header import TorchCheckpointError, bin_files, read_bin_checkpoint

__all__ = ["run_preflight", "PreflightResult", "Finding", "ModelInfo", "CODES", "KNOWN_ALGORITHMS",
           "SafetensorsHeaderError", "TorchCheckpointError"]

# SGLang 0.5.17 builtins (spec_info.SpeculativeAlgorithm) plus the NEXTN alias of EAGLE.
KNOWN_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DSPARK", "FROZEN_KV_MTP")
VERDICT_LINES, VERDICT_WIDTH = 4, 120  # the answer-first rule of every command


@dataclass
class PreflightResult:
    target: ModelInfo
    draft: ModelInfo
    algorithm: str
    steps: int | None
    topk: int | None
    draft_tokens: int | None
    fc_shape: tuple[int, ...] | None
    safetensors_files: int
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # where a hub id was found, an inferred algorithm
    bin_files: int = 0  # .bin files the shapes came from (when the drafter has no safetensors)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == ERROR]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == WARNING]

    @property
    def ok(self) -> bool:
        """True when no finding is an error (warnings alone still pass)."""
        return not self.errors

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    def to_dict(self) -> dict:
        def model(m: ModelInfo) -> dict:
            return {"path": m.path, "architectures": list(m.architectures), "hidden_size": m.hidden_size,
                    "num_hidden_layers": m.num_hidden_layers, "vocab_size": m.vocab_size}

        draft = model(self.draft)
        draft.update(draft_vocab_size=self.draft.draft_vocab_size,
                     target_hidden_size=self.draft.target_hidden_size,
                     num_aux_hidden_states=self.draft.num_aux_hidden_states,
                     aux_layer_ids=None if self.draft.aux_layer_ids is None else list(self.draft.aux_layer_ids),
                     fc_shape=None if self.fc_shape is None else list(self.fc_shape),
                     safetensors_files=self.safetensors_files, bin_files=self.bin_files)
        return {
            "ok": self.ok,
            "exit_code": self.exit_code,
            "algorithm": self.algorithm,
            "speculative_num_steps": self.steps,
            "speculative_eagle_topk": self.topk,
            "speculative_num_draft_tokens": self.draft_tokens,
            "target": model(self.target),
            "draft": draft,
            "findings": [f.to_dict() for f in self.findings],
            "notes": list(self.notes),
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def verdict_lines(self) -> list[str]:
        """The answer first: the verdict, then the fix of each finding, errors first (at most VERDICT_LINES
        lines of at most VERDICT_WIDTH characters); format_text repeats the verdict as its last line."""
        ne, nw = len(self.errors), len(self.warnings)
        out = [f"{'compatible' if self.ok else 'NOT compatible'}: {ne} error(s), {nw} warning(s)"]
        ranked = list(self.errors) + list(self.warnings)
        room = VERDICT_LINES - 1
        for i, f in enumerate(ranked[:room]):
            if i == room - 1 and len(ranked) > room:
                out.append(f"and {len(ranked) - i} more finding(s): see below")
                break
            out.append(f"{f.code} {f.severity}, fix: {f.fix}")
        return [ln if len(ln) <= VERDICT_WIDTH else ln[:VERDICT_WIDTH - 3].rstrip() + "..." for ln in out]

    def format_text(self) -> str:
        t, d = self.target, self.draft
        fc = f", fc {list(self.fc_shape)}" if self.fc_shape else ""
        params = ", ".join(f"{k} {v}" for k, v in (("steps", self.steps), ("topk", self.topk),
                                                    ("draft tokens", self.draft_tokens)) if v is not None)
        lines = self.verdict_lines() + [""] + [f"note: {n}" for n in self.notes] + [
            f"target : {t.path} ({t.arch}, hidden {t.hidden_size}, {t.num_hidden_layers} layers, vocab {t.vocab_size})",
            f"drafter: {d.path} ({d.arch}, hidden {d.hidden_size}{fc}, vocab {d.vocab_size}"
            + (f", draft vocab {d.draft_vocab_size}" if d.draft_vocab_size else "") + ")",
            f"algorithm {self.algorithm}" + (f", {params}" if params else ""),
            "",
        ]
        for f in self.findings:
            lines.append(f"{f.severity.upper():<7} {f.code}  {f.message}")
            lines.append(f"{'':<7} {'':<5}  fix: {f.fix}")
        ne, nw = len(self.errors), len(self.warnings)
        verdict = "compatible" if self.ok else "NOT compatible"
        if not self.findings:
            lines.append("no problems found")
        lines.append(f"{verdict}: {ne} error(s), {nw} warning(s)")
        return "\n".join(lines)


def _normalise_algorithm(algorithm: str) -> str:
    if not isinstance(algorithm, str) or not algorithm.strip():
        raise UserError("--speculative-algorithm is required (EAGLE or EAGLE3 for a drafter checkpoint)")
    algo = algorithm.strip().upper()
    if algo not in KNOWN_ALGORITHMS:
        raise UserError(f"unknown --speculative-algorithm {algorithm!r}; choose one of: {', '.join(KNOWN_ALGORITHMS)}")
    return algo  # NEXTN stays as given (SGLang aliases it to EAGLE; only EAGLE3 captures aux states)


def run_preflight(target_path, draft_path, algorithm: str | None, steps: int | None = None,
                  topk: int | None = None, draft_tokens: int | None = None, *, revision: str | None = None,
                  draft_revision: str | None = None, load_format: str | None = None,
                  draft_load_format: str | None = None, quantization: str | None = None,
                  draft_quantization: str | None = None) -> PreflightResult:
    """Check `target_path` + `draft_path` (local checkpoint dirs, or hub ids in the local Hugging
    Face cache: offline/preflight/hub_cache.py) for `--speculative-algorithm` (None: the one the drafter
    needs, said in a note). The load-format and quantization flags are the serve command's.

    Raises UserError on unusable input (hub_cache.NotCached for a hub id not in the cache);
    otherwise returns a PreflightResult (`.ok`, `.findings`).
    """
    from sglang_patches.offline.preflight.hub_cache import resolve_model

    algo = _normalise_algorithm(algorithm) if algorithm is not None else None
    target_path, t_note = resolve_model(target_path, "target", revision)
    draft_path, d_note = resolve_model(draft_path, "drafter", draft_revision)
    notes = [n for n in (t_note, d_note) if n]
    target = read_model_info(target_path, "target")
    draft = read_model_info(draft_path, "drafter")
    files = checkpoint_files(draft_path)
    bins = [] if files else bin_files(draft_path)  # SGLang loads .bin only where there is no safetensors
    extra = dict(steps=steps, topk=topk, draft_tokens=draft_tokens, load_format=load_format,
                 draft_load_format=draft_load_format, quantization=quantization,
                 draft_quantization=draft_quantization)
    # With dummy drafter weights SGLang builds every tensor from config.json and never opens the
    # checkpoint, so its headers are not read either: the checks then see the shapes SGLang builds.
    dummy = draft_is_dummy(load_format, draft_load_format)
    tensors, unread = None, None
    if files and not dummy:
        tensors = read_checkpoint_headers(draft_path)
    elif bins and not dummy:
        tensors, unread = read_bin_checkpoint(draft_path)
    if (files or bins) and dummy:
        kind = "safetensors" if files else ".bin"
        notes.append(f"drafter weights are dummy (random): its {len(files or bins)} {kind} file(s) are not read, "
                     "so fc/d2t/lm_head shapes in them were not checked")
    extra["weights_unread"] = unread
    if algo is None:  # what the drafter needs: EAGLE3 for an EAGLE-3 head, else EAGLE
        probe = Inputs(target=target, draft=draft, algorithm="EAGLE3", tensors=tensors, **extra)
        algo = "EAGLE3" if probe.eagle3 else "EAGLE"
        notes.append(f"no --speculative-algorithm given: checked as {algo}, the one this drafter needs; pass the "
                     "server's own to check what it runs")
    inp = Inputs(target=target, draft=draft, algorithm=algo, tensors=tensors, **extra)
    fc = inp.fc
    return PreflightResult(target=target, draft=draft, algorithm=algo, steps=steps, topk=topk,
                           draft_tokens=draft_tokens, fc_shape=fc.shape if fc else None,
                           safetensors_files=len(files), findings=run_rules(inp), notes=notes,
                           bin_files=len(bins) if tensors is not None and not files else 0)
