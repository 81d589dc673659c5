"""The what-if model: from one logged speculative configuration, predict accept length, cycle time and
tok/s for other steps / topk / draft tokens (`advisor.py`, with the observation it reads in
`advisor_observation.py` and `advisor_records.py`), on the per-batch-size cost model that sweeps fit
(`cost_model.py`) over the configurations SGLang accepts (`grid.py`).

Imported by both halves: the server's `/spec_timing` advice (`server/timing/runtime.py`) and the
offline `report`, `advise` and `sweep`. It must import nothing from `sglang_patches.offline` or
`sglang_patches.server` (tests/test_import_boundary.py).
"""
