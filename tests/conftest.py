"""Session guard: with SGP_REQUIRE_SGLANG=1 (tests/run_cpu.sh and CI set it) the run fails at once
when sglang 0.5.17 cannot be imported, instead of the SGLang tests skipping silently through
`importorskip`. Without the variable (a bare `pytest` elsewhere) those tests may skip.

Also: a suite started as a background job (`bash tests/run_cpu.sh &`) inherits SIGINT ignored, and
so would every process a test spawns; the tests that press Ctrl-C on a child (profile, run_parallel)
would then wait out their timeouts. Python's own handler is put back, as in a foreground run."""
from __future__ import annotations

import os

import pytest

REQUIRED_SGLANG = "0.5.17"


def pytest_sessionstart(session):
    import signal

    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if os.environ.get("SGP_REQUIRE_SGLANG") != "1":
        return
    try:
        import sglang  # noqa: F401
        from importlib.metadata import version

        found = version("sglang")
    except Exception as exc:  # noqa: BLE001 - any failure to import counts
        pytest.exit(f"SGP_REQUIRE_SGLANG=1 but sglang cannot be imported ({type(exc).__name__}: {exc}); "
                    "build the test env with `bash tests/run_cpu.sh`", returncode=3)
    if found != REQUIRED_SGLANG:
        pytest.exit(f"SGP_REQUIRE_SGLANG=1 but sglang {found} is installed, the tests need {REQUIRED_SGLANG}; "
                    "rebuild the env with `bash tests/run_cpu.sh`", returncode=3)
