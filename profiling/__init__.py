"""Host-side profiling helpers (importable as sglang_patches.profiling): py-spy and torch.profiler tied to cycle timings."""
