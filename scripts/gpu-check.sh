#!/usr/bin/env bash
# On the GPU machine, in one call: machine facts, the GPU tests, the CPU tests (16 cores of real
# concurrency), the demo and the benchmarks. Results go to $OUT; summary.md is what gets committed
# under bench/results/. Binaries come from .gpu-bin/ (scripts/build-for-gpu.sh), or are built here.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BIN=.gpu-bin
if [ ! -x "$BIN/kcache_gpu_tests" ]; then
  echo "no prebuilt binaries in $BIN: building here"
  cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release >/dev/null && \
    cmake --build build-gpu -j"$(nproc)" --target kcache_tool kcache_bench kcache_gpu_tests kcache_cpu_tests || exit 1
  mkdir -p "$BIN" && cp build-gpu/kcache build-gpu/kcache_bench build-gpu/kcache_gpu_tests build-gpu/kcache_cpu_tests "$BIN"/
fi

status=0
{
  echo "# kcache GPU check"
  echo
  echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "- machine: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1), $(nproc) CPU cores, $(uname -r)"
  echo "- commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
  echo
} > "$OUT/summary.md"

run() {  # run NAME CMD...: log to $OUT/NAME.txt, record pass/fail
  local name=$1; shift
  echo "== $name: $*"
  "$@" > "$OUT/$name.txt" 2>&1
  local rc=$?
  tail -n 40 "$OUT/$name.txt"
  echo "- $name: exit $rc" >> "$OUT/summary.md"
  [ $rc -eq 0 ] || status=1
}

run gpu_tests "$BIN/kcache_gpu_tests"
run cpu_tests "$BIN/kcache_cpu_tests"
run demo "$BIN/kcache" demo
run demo_json "$BIN/kcache" demo --json
run bench "$BIN/kcache_bench" --out "$OUT/bench.md"
run bench_fences env KCACHE_EPOCH_FENCES=1 "$BIN/kcache_bench" --no-launch --out "$OUT/bench_fences.md"

{
  echo
  echo "## GPU tests"
  echo '```'
  grep -E '^\[ +(OK|FAILED|SKIPPED|PASSED) +\]|tests? ran|JIT error as returned' "$OUT/gpu_tests.txt"
  echo '```'
  echo
  echo "## CPU tests on this machine"
  echo '```'
  grep -E 'tests? ran|PASSED|FAILED' "$OUT/cpu_tests.txt" | tail -5
  echo '```'
  echo
  echo "## Demo"
  echo '```'
  cat "$OUT/demo.txt"
  cat "$OUT/demo_json.txt"
  echo '```'
  echo
  cat "$OUT/bench.md" 2>/dev/null
  echo
  echo "## The same hit path with a fence per epoch pin (KCACHE_EPOCH_FENCES=1)"
  echo
  sed -n '/^| threads/,$p' "$OUT/bench_fences.md" 2>/dev/null
} >> "$OUT/summary.md"
echo
cat "$OUT/summary.md"
exit $status
