#!/usr/bin/env bash
# Set up the CPU test environment (real SGLang modules, no GPU) and run the test suite.
#   bash tests/run_cpu.sh [pytest args]
# The venv goes to $SGP_TEST_VENV (default .venv-test in the repo root); it is reused when its
# requirements stamp matches, and rebuilt from scratch otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${SGP_TEST_VENV:-.venv-test}
PY=${PYTHON:-python3}
stamp=$( (cat tests/requirements-cpu.txt tests/fix_torchvision_cpu.py; echo sglang-0523) | sha256sum | cut -c1-16)
if [ ! -f "$VENV/.stamp" ] || [ "$(cat "$VENV/.stamp")" != "$stamp" ]; then
  echo "== building CPU test env in $VENV (about 2-3 minutes)"
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q -r tests/requirements-cpu.txt
  "$VENV/bin/pip" install -q --no-deps sglang==0.5.17
  "$VENV/bin/python" tests/fix_torchvision_cpu.py
  # sglang 0.5.23 cannot be imported here (it pins torch 2.14.1, a multi-GB CUDA wheel on PyPI):
  # its sources are unpacked next to the venv and the hook targets are checked statically (AST).
  "$VENV/bin/pip" install -q --no-deps --target "$VENV/sglang-0523" sglang==0.5.23
  echo "$stamp" > "$VENV/.stamp"
fi
"$VENV/bin/pip" install -q --no-deps --no-build-isolation -e .
export SGP_SGLANG_0523_SITE="$VENV/sglang-0523"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TRITON_INTERPRET=1
export SGP_REQUIRE_SGLANG=1  # tests/conftest.py: fail the run if sglang 0.5.17 is not importable
set +e
"$VENV/bin/python" -m pytest -q "$@" tests
rc=$?
set -e
[ $rc -eq 5 ] && { echo "no tests collected"; exit 1; }
exit $rc
