#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The Python package's CPU tests (bindings/python/tests; GPU tests skip), run by ctest as
# `python_bindings`: builds the extension against the static library of the build folder given
# (BUILD/libkcache.a, not kcache's sources again), installs it into a venv under that folder and
# runs pytest there. The venv gets nanobind, scikit-build-core, pytest and numpy from PyPI once;
# without PyPI the step fails in CI (CI=true) and is skipped elsewhere (exit 77).
#   usage: scripts/test-python.sh BUILD_DIR
set -euo pipefail
build=$(cd "${1:?usage: test-python.sh BUILD_DIR}" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
venv=$build/python-venv
skip() {
  if [ "${CI:-}" = true ]; then
    echo "test-python: FAILED: $1; CI must run the Python tests" >&2
    exit 1
  fi
  echo "test-python: skipped: $1"
  exit 77
}
if [ ! -x "$venv/bin/python" ]; then
  "${KCACHE_TEST_PYTHON:-python3}" -m venv "$venv" || skip "could not make a venv (python3-venv)"
fi
py=$venv/bin/python
if ! "$py" -c 'import nanobind, scikit_build_core, pytest, numpy' 2>/dev/null; then
  "$py" -m pip install -q --disable-pip-version-check --timeout 30 --retries 2 \
    nanobind scikit-build-core pytest numpy ||
    skip "pip could not install nanobind, scikit-build-core, pytest and numpy (no PyPI?)"
fi
library=$build/libkcache.a
if [ ! -f "$library" ]; then
  echo "test-python: no $library: build kcache_static first" >&2
  exit 1
fi
launcher=()
command -v ccache >/dev/null && launcher=(-C cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache)
# The extension's build folder is kept, so that a second run rebuilds only what changed.
"$py" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps \
  --force-reinstall "$root/bindings/python" -C build-dir="$build/python-ext" \
  -C cmake.define.KCACHE_PYTHON_PREBUILT_LIBRARY="$library" "${launcher[@]}"
# From the build folder, so that `import kcache` is the installed package.
cd "$build"
exec "$py" -m pytest -q -p no:cacheprovider "$root/bindings/python/tests"
