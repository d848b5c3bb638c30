#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the Python package's wheel for the GPU machine (Ubuntu 24.04, Python 3.12, no network)
# into .gpu-python/, which the device tool carries there (docs/python.md).
#
# The wheel is built with a Python >= 3.12, so the extension uses CPython's stable ABI
# (cp312-abi3): it imports on 3.12 and every later CPython, on any glibc at least as new as this
# machine's. It carries Debian's libhiredis (a SONAME other distributions lack); libzstd.so.1 and
# libcrypto.so.3 are found on the target as they are. Beside it, build-deps/ holds the nanobind
# and scikit-build-core wheels, for building from the source tree there without a network.
#   KCACHE_WHEEL_PYTHON=/path/to/python3.12 picks the interpreter (else python3.12, a pyenv 3.12+,
#   or python3 if it is 3.12+).
set -euo pipefail
cd "$(dirname "$0")/.."

is_312_or_later() { "$1" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; }
python="${KCACHE_WHEEL_PYTHON:-}"
if [ -z "$python" ]; then
  candidates=(python3.12 python3.13)
  if command -v pyenv >/dev/null; then
    for v in "$(pyenv root)"/versions/3.1[2-9]*; do candidates+=("$v/bin/python3"); done
  fi
  candidates+=(python3)
  for c in "${candidates[@]}"; do
    if command -v "$c" >/dev/null && is_312_or_later "$c"; then python=$(command -v "$c"); break; fi
  done
fi
if [ -z "$python" ] || ! is_312_or_later "$python"; then
  echo "build-python-wheel: no Python 3.12 or later here (set KCACHE_WHEEL_PYTHON)" >&2
  exit 1
fi
echo "build-python-wheel: building with $python ($("$python" --version))"
"$python" -c 'import nanobind, scikit_build_core' 2>/dev/null ||
  "$python" -m pip install -q nanobind scikit-build-core

out=.gpu-python
rm -rf "$out" && mkdir -p "$out/build-deps"
launcher=()
command -v ccache >/dev/null && launcher=(-C cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache)
export PATH="/usr/local/cuda/bin:$PATH"
"$python" -m pip wheel --no-build-isolation --no-deps bindings/python -w "$out" \
  -C build-dir=build/python-wheel "${launcher[@]}"
"$python" -m pip download -q --only-binary=:all: --python-version 3.12 -d "$out/build-deps" \
  nanobind scikit-build-core
# pytest, for a GPU machine that lacks it (scripts/gpu-python.sh unpacks these only then).
"$python" -m pip download -q --only-binary=:all: --python-version 3.12 -d "$out/test-deps" pytest
echo "$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src include bindings/python || echo ' with uncommitted changes')" > "$out/COMMIT"
echo "built into $out/: $(cd "$out" && ls *.whl build-deps/*.whl test-deps/*.whl | tr '\n' ' ')"
