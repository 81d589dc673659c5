"""Session guard and the SGLang version under test.

`tests/run_cpu.sh` runs the suite once per supported SGLang version, setting SGP_SGLANG_UNDER_TEST
(0.5.17: installed in the venv; 0.5.23: its folder first on PYTHONPATH) and SGP_REQUIRE_SGLANG=1.
With SGP_REQUIRE_SGLANG=1 the run fails at once when sglang cannot be imported or is not the
version under test, instead of the SGLang tests skipping silently through `importorskip` or
running on the other version. Without the variable (a bare `pytest` elsewhere) those tests may skip.

Tests written for one version's internals say so: `@needs_sglang("0.5.17", why="...")` skips them
on another version with a reason naming both versions and why (`sglang_under_test()` for tests
parametrised by version).

Also: a suite started as a background job (`bash tests/run_cpu.sh &`) inherits SIGINT ignored, and
so would every process a test spawns; the tests that press Ctrl-C on a child (profile, run_parallel)
would then wait out their timeouts. Python's own handler is put back, as in a foreground run."""
from __future__ import annotations

import os

import pytest

UNDER_TEST_ENV = "SGP_SGLANG_UNDER_TEST"
DEFAULT_SGLANG = "0.5.17"  # the venv's own sglang (no folder put first on the path)


def sglang_under_test() -> str:
    return os.environ.get(UNDER_TEST_ENV) or DEFAULT_SGLANG


def needs_sglang(*versions: str, why: str):
    """Skip unless the SGLang under test is one of `versions`; `why` says what ties the test to them."""
    if not why:
        raise ValueError("needs_sglang: say why the test is tied to these versions")
    v = sglang_under_test()
    return pytest.mark.skipif(v not in versions, reason=f"sglang {', '.join(versions)} only, not {v}: {why}")


def pytest_sessionstart(session):
    import signal

    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if os.environ.get("SGP_REQUIRE_SGLANG") != "1":
        return
    want = sglang_under_test()
    try:
        import sglang  # noqa: F401
        from importlib.metadata import version

        found = version("sglang")
    except Exception as exc:  # noqa: BLE001 - any failure to import counts
        pytest.exit(f"SGP_REQUIRE_SGLANG=1 but sglang cannot be imported ({type(exc).__name__}: {exc}); "
                    "build the test env with `bash tests/run_cpu.sh`", returncode=3)
    if found != want:
        pytest.exit(f"SGP_REQUIRE_SGLANG=1 but sglang {found} is importable, the run is for {want} "
                    f"({UNDER_TEST_ENV}); run `bash tests/run_cpu.sh --sglang {want}`", returncode=3)
    where = os.path.dirname(os.path.dirname(os.path.abspath(sglang.__file__)))
    meta = os.path.join(where, f"sglang-{found}.dist-info")
    if not os.path.isdir(meta):
        # the version read from one place and the modules imported from another (two on the path)
        pytest.exit(f"SGP_REQUIRE_SGLANG=1 but the sglang modules imported from {where} are not those of "
                    f"sglang {found}; put one sglang first on the path", returncode=3)
