"""Host-side profiling helpers (importable as sglang_patches.profiling): py-spy and torch.profiler tied to cycle timings."""


def __getattr__(name):  # lazy: `import sglang_patches.profiling` stays cheap (no psutil, no HTTP)
    if name == "profile_server":
        from sglang_patches.profiling.session import profile_server

        return profile_server
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["profile_server"]
