#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Packs this machine's perf with every library it links, and the loader, into .perf-bin/ (ignored
# by git), for scripts/gpu-profile.sh on a GPU machine that has no perf. Run it with the loader:
#   .perf-bin/lib/ld-linux-x86-64.so.2 --library-path .perf-bin/lib .perf-bin/perf ...
set -euo pipefail
cd "$(dirname "$0")/.."
perf=$(command -v perf)
rm -rf .perf-bin && mkdir -p .perf-bin/lib
cp "$perf" .perf-bin/perf
for lib in $(ldd "$perf" | awk '/=>/ {print $3} /ld-linux/ {print $1}'); do cp -L "$lib" .perf-bin/lib/; done
strip .perf-bin/perf .perf-bin/lib/* 2>/dev/null || true
du -sh .perf-bin
