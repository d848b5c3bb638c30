#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The test command: installs what the build needs, builds, runs every test (GPU tests skip
# without a GPU) under ctest, then the style checks (scripts/lint.sh) and the sanitizer builds
# and fuzz targets (scripts/test-hardening.sh) unless KCACHE_TEST_QUICK=1. A failed check still
# lets the next one run; the script then exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
# install-deps put redis-server here: the remote tier's tests fail, not skip, if it cannot start.
export KCACHE_TEST_REQUIRE_REDIS="${KCACHE_TEST_REQUIRE_REDIS:-1}"
export PATH="/usr/local/cuda/bin:$PATH"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKCACHE_WERROR=ON >/dev/null
cmake --build build -j"$(nproc)"
ctest --test-dir build --output-on-failure -j"$(nproc)" --timeout 300
status=0
if [ "${KCACHE_TEST_QUICK:-0}" != 1 ]; then
  bash scripts/lint.sh || status=1
  bash scripts/test-hardening.sh || status=1
fi
exit "$status"
