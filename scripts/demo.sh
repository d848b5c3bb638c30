#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The main job: installs what the build needs, builds, runs `kcache demo` (arguments pass through).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
export PATH="/usr/local/cuda/bin:$PATH"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" --target kcache_tool >/dev/null
exec ./build/kcache demo "$@"
