"""The hidden-state rule set: one pure function from the numbers to findings (SP001-SP004, and
SP005 for a target that captures nothing).

Three callers, one set of messages and fixes:
- preflight, before anything starts, fills the numbers from both `config.json`s and the drafter's
  safetensors headers (`rules.sp001_sp004_hidden_state`);
- the load-time check in every scheduler process fills them from the loaded modules: the drafter's
  class and `fc` layer, the target's hidden size and the layers SGLang set it to capture
  (`patches.hidden_state_checks.load_time_check`);
- the runtime check, when the hidden states entering draft-extend are not `fc`'s input width, adds
  that width (`observed_width`) to the load-time numbers and raises the finding it gets back.

Mechanism (SGLang 0.5.17, sources in rules.py's module note): an EAGLE-3 drafter's
`fc = Linear(hidden_in * n, draft_hidden)` reads the concatenated inputs of the target layers that
the target captures. Only `--speculative-algorithm EAGLE3` makes the target capture; with any other
algorithm it feeds its final-layer states (width `target_hidden`) and SGLang, seeing a width equal
to the embedding width, skips `fc` without an error, so nearly nothing is accepted.
"""
from __future__ import annotations

from dataclasses import dataclass

from sglang_patches.vocab.findings import ERROR, Finding

SGLANG_DEFAULT_AUX_LAYERS = 3  # layers captured when the drafter lists none: [2, L // 2, L - 3]


@dataclass(frozen=True)
class HiddenStateNumbers:
    algorithm: str                    # --speculative-algorithm, upper-case (NEXTN: SGLang's alias of EAGLE)
    drafter: str                      # the drafter's architecture or class, for messages
    drafter_eagle3: bool              # the drafter is an EAGLE-3 head (its fc reads the target's aux states)
    eagle3_evidence: tuple[str, ...]  # why it counts as EAGLE-3, for messages
    fc_in: int | None                 # the drafter's fc input width (None: it has no fc)
    fc_out: int | None                # the drafter's fc output width (None: unknown)
    draft_hidden: int                 # the drafter layer's hidden_size
    target_hidden: int                # the target's hidden_size
    hidden_in: int                    # the target width the drafter was built for (target_hidden_size or hidden_size)
    drafter_aux: int                  # n in fc = Linear(hidden_in * n, ...): aux states the drafter was built for
    aux_capture: bool                 # the target captures aux states (algorithm EAGLE3 and capture switched on)
    captured: int                     # distinct target layers captured and fed to the drafter
    layers_desc: str                  # which layers, for messages ("layers [1, 29, 57]", "SGLang's default layers [...]")
    layer_ids_given: bool             # the drafter's config lists eagle_config.eagle_aux_hidden_state_layer_ids
    drafter_config: str               # the drafter's config.json, named in fixes
    # Layer ids the drafter's config lists (0: none listed, or not known). More listed than
    # `captured` means ids out of the target's range or duplicated: SP005 names them with the fix,
    # so SP003 does not count the captured ones; it names only fc's width against the listed count.
    listed_layers: int = 0
    # Known only before SGLang builds the drafter (preflight reads the checkpoint); None at load
    # time, where SGLang has built fc from config.json and loaded the checkpoint's weight into it.
    built_fc_in: int | None = None    # the fc input width SGLang builds from config.json
    built_from: str | None = None     # which config setting gives its n
    checkpoint_has_fc: bool | None = None
    # The runtime check: the width of the hidden states seen entering draft-extend, and where.
    observed_width: int | None = None
    observed_at: str = ""


def hidden_state_findings(n: HiddenStateNumbers) -> list[Finding]:
    """Every hidden-state finding for these numbers (empty: the pair is consistent)."""
    out: list[Finding] = []
    H, fc_in = n.target_hidden, n.fc_in
    if n.drafter_eagle3 and n.algorithm != "EAGLE3":
        k = fc_in // n.hidden_in if fc_in and fc_in % n.hidden_in == 0 else n.drafter_aux
        out.append(Finding("SP001", ERROR,
            f"drafter fc expects {fc_in} = {k} x {(fc_in or 0) // k} from {n.layers_desc}; "
            f"--speculative-algorithm {n.algorithm} feeds final-layer states of width {H} "
            f"(the drafter is EAGLE-3: {', '.join(n.eagle3_evidence)}). SGLang raises nothing: fc is skipped, "
            "the drafter's lm_head and d2t are replaced by the target's, and accept length collapses to ~1",
            "--speculative-algorithm EAGLE3"))
    if n.algorithm == "EAGLE3" and not n.drafter_eagle3:
        fed = n.captured or SGLANG_DEFAULT_AUX_LAYERS
        out.append(Finding("SP002", ERROR,
            f"--speculative-algorithm EAGLE3 makes the target feed {H * fed} = {fed} x {H} aux states, but "
            f"drafter {n.drafter} is not EAGLE-3 (no fc weight, no 'Eagle3' architecture, no eagle_config / "
            "draft_vocab_size / target_hidden_size)",
            "--speculative-algorithm EAGLE (for an EAGLE/EAGLE-2 drafter), or use an EAGLE-3 drafter"))
        return out
    if not n.drafter_eagle3:
        return out
    if n.checkpoint_has_fc is False:
        out.append(Finding("SP003", ERROR,
            f"drafter {n.drafter} looks EAGLE-3 but its checkpoint has no fc.weight; SGLang would leave the "
            f"fc ({n.hidden_in * n.drafter_aux} -> {n.draft_hidden}) randomly initialised",
            "use a complete EAGLE-3 checkpoint (it must contain fc.weight)"))
        return out
    built_mismatch = n.built_fc_in is not None and fc_in is not None and fc_in != n.built_fc_in
    if built_mismatch:
        out.append(Finding("SP003", ERROR,
            f"checkpoint fc.weight is {[n.fc_out, fc_in]} (input {fc_in}) but config.json makes SGLang build fc "
            f"with input {n.built_fc_in} = {n.drafter_aux} ({n.built_from}) x {n.hidden_in}; "
            "weight loading fails on the shape",
            "make num_aux_hidden_states / eagle_config.eagle_aux_hidden_state_layer_ids / target_hidden_size "
            f"in {n.drafter_config} match the checkpoint"))
    if n.aux_capture and fc_in is not None:
        if n.observed_width is not None:
            fed_width, fed = n.observed_width, f"width {n.observed_width} of the hidden states entering {n.observed_at}"
        else:
            fed_width = H * n.captured
            fed = f"target hidden {H} x {n.captured} aux layers ({n.layers_desc}) = {fed_width}"
        # some listed layer is never captured (out of range or duplicated): SP005 names it with the fix
        # (the valid range, the config key). Counting the captured rest here would blame the drafter
        # ("trained for 2 aux layers") for a config error; what is left for SP003 is fc's width against
        # the listed count, a mismatch of checkpoint and config that SP005's fix alone does not mend,
        # unless the built-width finding above already names it.
        deferred = n.observed_width is None and n.captured < n.listed_layers
        if deferred and fc_in != n.hidden_in * n.listed_layers and not built_mismatch:
            k = (f" = {fc_in // n.hidden_in} x {n.hidden_in}" if fc_in % n.hidden_in == 0 else "")
            want = fc_in // n.hidden_in if fc_in % n.hidden_in == 0 else None
            out.append(Finding("SP003", ERROR,
                f"drafter fc input width {fc_in}{k}, but eagle_config.eagle_aux_hidden_state_layer_ids in "
                f"{n.drafter_config} lists {n.listed_layers} layer ids: even with every id in range, fc would "
                "not match",
                (f"list the {want} layer ids the drafter was trained on" if want else
                 "list the layer ids the drafter was trained on")
                + f" in eagle_config.eagle_aux_hidden_state_layer_ids of {n.drafter_config}, each in the target's range"))
        if fc_in != fed_width and not deferred:
            if not n.layer_ids_given and n.drafter_aux != SGLANG_DEFAULT_AUX_LAYERS:
                fix = (f"add eagle_config.eagle_aux_hidden_state_layer_ids with {n.drafter_aux} layer ids "
                       f"(the ones the drafter was trained on) to {n.drafter_config}")
            else:
                fix = f"use a drafter trained for this target (hidden_size {H}, {n.captured} aux layers)"
            out.append(Finding("SP003", ERROR, f"drafter fc input width {fc_in} != {fed}", fix))
    if n.fc_out is not None and n.fc_out != n.draft_hidden:
        out.append(Finding("SP004", ERROR,
            f"drafter fc.weight is {[n.fc_out, fc_in]}: output width {n.fc_out} != drafter hidden_size "
            f"{n.draft_hidden}",
            f"fix hidden_size in {n.drafter_config} (or use a matching checkpoint)"))
    if n.algorithm == "EAGLE3" and not n.aux_capture:
        out.append(Finding("SP005", ERROR,
            "the target captures no aux hidden states (eagle_config.use_aux_hidden_state is false, or the "
            "target's SGLang model class has no EAGLE-3 capture), so the drafter's fc is silently skipped",
            f"set eagle_config.use_aux_hidden_state to true in {n.drafter_config}, with a target model that "
            "SGLang can capture EAGLE-3 states from"))
    return out
