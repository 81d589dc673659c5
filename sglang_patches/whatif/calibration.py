"""Draft / verify / draft-extend cost deltas between chains from a calibration sweep's fitted cost
model (`whatif.cost_model.fit_all`): what the advisor adds to a log's own phase medians when
`--calibration SWEEP_DIR` is given (whatif/advisor.py)."""
from __future__ import annotations

from sglang_patches.errors import UserError


class Calibration:
    """Draft / verify / draft-extend cost as a function of steps (topk 1), from a sweep's fitted cost model.

    `models` maps batch size -> `whatif.cost_model.BsModel`; the nearest calibrated batch size (in
    log scale) serves a logged one."""

    prices_draft = True     # all three phases come from the fit (whatif/verify_ratios.py prices verify alone)
    kind = "calibration"

    def __init__(self, models: dict, source: str):
        if not models:
            raise UserError(f"--calibration {source}: no speculative rows with phase times to fit; "
                            "give a sweep directory whose results.jsonl has ok speculative rows")
        self.models = models
        self.source = source

    def model_for(self, bs: int):
        from sglang_patches.whatif.cost_model import nearest_batch

        key = nearest_batch(self.models, bs)
        return key, self.models[key]

    def delta_ms(self, bs: int, steps_from: int, steps_to: int) -> tuple[float, float, float]:
        """(draft, verify, extend) change in ms from chain `steps_from` to `steps_to` (topk 1, draft
        tokens = steps + 1), from the fitted per-batch-size model."""
        from sglang_patches.whatif.cost_model import draft_features, ndt_features
        from sglang_patches.whatif.grid import Config

        _, m = self.model_for(bs)
        a = Config(topk=1, steps=steps_from, draft_tokens=steps_from + 1)
        b = Config(topk=1, steps=steps_to, draft_tokens=steps_to + 1)
        return (m.draft(draft_features(b)) - m.draft(draft_features(a)),
                m.verify(ndt_features(b)) - m.verify(ndt_features(a)),
                m.extend(ndt_features(b)) - m.extend(ndt_features(a)))
