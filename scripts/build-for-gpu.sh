#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the GPU-facing binaries here (Release) into .gpu-bin/, which the device tool carries to
# the GPU machine, where scripts/gpu-check.sh runs them. The GPU machine lacks some of our build
# dependencies (CLI11, xxhash headers); binaries built here run there unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."
# PROFILE=1 builds with frame pointers, in a folder of its own, for perf's call graphs
# (scripts/gpu-profile.sh).
build=build-gpu flags=()
if [ "${PROFILE:-0}" = 1 ]; then
  build=build-gpu-profile flags=(-DCMAKE_CXX_FLAGS=-fno-omit-frame-pointer)
fi
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release "${flags[@]}" >/dev/null
cmake --build "$build" -j"$(nproc)" --target kcache_tool kcache_bench kcache_gpu_tests kcache_cpu_tests kcache_fleet
rm -rf .gpu-bin && mkdir -p .gpu-bin
cp "$build"/kcache "$build"/kcache_bench "$build"/kcache_gpu_tests "$build"/kcache_cpu_tests "$build"/kcache_fleet .gpu-bin/
# What the GPU machine lacks for the remote tier: hiredis (linked by kcache), and a redis-server
# (with redis-cli) for its tests and benchmarks, from Debian's packages, unpacked beside the
# binaries; scripts/gpu-check.sh puts them on the paths.
mkdir -p .gpu-debs
(cd .gpu-debs && for p in libhiredis0.14 redis-server redis-tools liblzf1 libjemalloc2; do
  ls "$p"_*.deb >/dev/null 2>&1 || apt-get download "$p" >/dev/null
done)
for deb in .gpu-debs/*.deb; do dpkg -x "$deb" .gpu-bin/deps; done
# The commit the binaries come from: the GPU machine's copy of the tree cannot tell it.
echo "$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src include tools bench CMakeLists.txt cmake || echo ' with uncommitted changes')" > .gpu-bin/COMMIT
echo "built into .gpu-bin/: $(ls .gpu-bin | tr '\n' ' ')"
