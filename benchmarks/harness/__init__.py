"""The plumbing every benchmark script shares, one concern a module:

- `files`: a run's files: lenient reads, atomic JSON writes, and `run_meta()`, the header (exact command, UTC
  date, versions and GPU) of every results file a published figure comes from;
- `bench_serving`: SGLang's own serving client (`sglang.bench_serving`), many runs in one process;
- `pairing`: A/B runs in one call: alternating order, paired ratios and their bootstrap interval.

Servers are started and waited for by `sglang_patches.offline.sweep.server`, the `sweep` command's own.
"""
