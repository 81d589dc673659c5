#!/usr/bin/env bash
# Set up the CPU test environment (real SGLang modules, no GPU) and run the test suite on every
# supported SGLang version, one after the other (exit non-zero if any run fails):
#   bash tests/run_cpu.sh [pytest args]                       # 0.5.17, then 0.5.23
#   bash tests/run_cpu.sh --sglang 0.5.23 [pytest args]       # one version
# Both versions run in the same venv and CPU torch: 0.5.17 is installed in it; 0.5.23's modules are
# installed (no deps) into $VENV/sglang-0523, which goes first on PYTHONPATH for its run (children
# the tests spawn inherit it). Without a test path among the pytest args the whole tests/ runs.
# The venv goes to $SGP_TEST_VENV (default .venv-test in the repo root); it is reused when its
# requirements stamp matches, and rebuilt from scratch otherwise.
set -euo pipefail
VERSIONS="0.5.17 0.5.23"
if [ "${1:-}" = "--sglang" ]; then
  case "${2:-}" in
    0.5.17|0.5.23) VERSIONS=$2; shift 2 ;;
    *) echo "run_cpu.sh: --sglang ${2:-(missing)}: expected one of 0.5.17 0.5.23" >&2; exit 2 ;;
  esac
fi
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
  # sglang 0.5.23 pins torch 2.14.1 (a multi-GB CUDA wheel on PyPI): installed without its deps next
  # to the venv, its modules import with the venv's CPU torch when the folder is first on the path.
  "$VENV/bin/pip" install -q --no-deps --target "$VENV/sglang-0523" sglang==0.5.23
  echo "$stamp" > "$VENV/.stamp"
fi
"$VENV/bin/pip" install -q --no-deps --no-build-isolation -e .
SITE_0523=$(cd "$VENV/sglang-0523" && pwd)
export SGP_SGLANG_0523_SITE="$SITE_0523"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TRITON_INTERPRET=1
export SGP_REQUIRE_SGLANG=1  # tests/conftest.py: fail the run unless SGP_SGLANG_UNDER_TEST is importable
paths=()
for arg in "$@"; do
  [ -e "${arg%%::*}" ] && [ "${arg#-}" = "$arg" ] && paths+=("$arg")
done
[ ${#paths[@]} -eq 0 ] && set -- "$@" tests
status=0
for v in $VERSIONS; do
  echo "== sglang $v"
  start=$(date +%s)
  set +e
  if [ "$v" = 0.5.23 ]; then
    SGP_SGLANG_UNDER_TEST=$v PYTHONPATH="$SITE_0523${PYTHONPATH:+:$PYTHONPATH}" \
      "$VENV/bin/python" -m pytest -q "$@"
  else
    SGP_SGLANG_UNDER_TEST=$v "$VENV/bin/python" -m pytest -q "$@"
  fi
  rc=$?
  set -e
  echo "== sglang $v: exit $rc after $(( $(date +%s) - start )) s"
  [ $rc -eq 5 ] && { echo "no tests collected"; rc=1; }
  [ $rc -ne 0 ] && status=$rc
done
exit $status
