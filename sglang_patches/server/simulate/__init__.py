"""Simulated acceptance (benchmark only): per-position conditional accept rates replace the real
verify result, so a sweep over steps shows the trade-off that real, position-decaying acceptance
gives. `rates` (parsing, checks, rates from a log; no torch), `checks` (launch-time refusals),
`sampler` (the per-request draw and the tensors SGLang's own simulation writes), `sglang_hooks`
(where it touches SGLang, and its state in a scheduler process).
"""
