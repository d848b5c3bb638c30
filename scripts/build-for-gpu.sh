#!/usr/bin/env bash
# Builds the GPU-facing binaries here (Release) into .gpu-bin/, which the device tool carries to
# the GPU machine, where scripts/gpu-check.sh runs them. The GPU machine lacks some of our build
# dependencies (CLI11, xxhash headers); binaries built here run there unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-gpu -j"$(nproc)" --target kcache_tool kcache_bench kcache_gpu_tests kcache_cpu_tests
rm -rf .gpu-bin && mkdir -p .gpu-bin
cp build-gpu/kcache build-gpu/kcache_bench build-gpu/kcache_gpu_tests build-gpu/kcache_cpu_tests .gpu-bin/
# The commit the binaries come from: the GPU machine's copy of the tree cannot tell it.
echo "$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src include tools bench CMakeLists.txt || echo ' with uncommitted changes')" > .gpu-bin/COMMIT
echo "built into .gpu-bin/: $(ls .gpu-bin | tr '\n' ' ')"
