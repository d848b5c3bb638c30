#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# On the GPU machine, in one call: machine facts, the GPU tests, the CPU tests (16 cores of real
# concurrency), the demo and the benchmarks. Results go to $OUT; summary.md is what gets committed
# under bench/results/. Binaries come from .gpu-bin/ (scripts/build-for-gpu.sh), or are built here.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
LOGS="$OUT/logs"  # packed into logs.tar.gz at the end: the device tool returns at most 8 files
mkdir -p "$LOGS"
BIN=.gpu-bin
if [ ! -x "$BIN/kcache_gpu_tests" ]; then
  echo "no prebuilt binaries in $BIN: building here"
  cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release >/dev/null && \
    cmake --build build-gpu -j"$(nproc)" --target kcache_tool kcache_bench kcache_gpu_tests kcache_cpu_tests || exit 1
  mkdir -p "$BIN" && cp build-gpu/kcache build-gpu/kcache_bench build-gpu/kcache_gpu_tests build-gpu/kcache_cpu_tests "$BIN"/
fi

# The remote tier's libraries and redis-server, carried (scripts/build-for-gpu.sh).
if [ -d "$BIN/deps" ]; then
  export LD_LIBRARY_PATH="$PWD/$BIN/deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PATH="$PWD/$BIN/deps/usr/bin:$PATH"
fi
# Here the remote tier's tests must run, not skip.
export KCACHE_TEST_REQUIRE_REDIS=1

status=0
{
  echo "# kcache GPU check"
  echo
  echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "- machine: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1), $(nproc) CPU cores, $(uname -r)"
  # Where kcache looks for NVRTC and nvJitLink first (src/driver/compiler_api.cpp), and what the
  # loader would find: the search is part of a new process's first kernel.
  echo "- compiler search: LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-(unset)} CUDA_HOME=${CUDA_HOME:-(unset)} CUDA_PATH=${CUDA_PATH:-(unset)}; $(ls -l /usr/local/cuda 2>/dev/null | sed 's/.* -> /\/usr\/local\/cuda -> /')"
  echo "- binaries built at commit: $(cat "$BIN/COMMIT" 2>/dev/null || echo 'unknown (built here)')"
  # Whether the cores are hyperthreads: a parallel compile's scaling depends on it.
  echo "- CPU: $(lscpu 2>/dev/null | grep -E '^(Model name|Thread\(s\) per core|Core\(s\) per socket|Socket\(s\))' | sed 's/  */ /g' | paste -sd ';' -)"
  # What a durable write costs on this disk (every stored entry pays one fsync): 20 files of
  # 10 KiB written by dd with and without fsync, process start included in both.
  probe=$(mktemp -d)
  for sync in conv=fsync none; do
    start=$(date +%s%N)
    for i in $(seq 1 20); do
      if [ "$sync" = none ]; then dd if=/dev/zero of="$probe/f$i" bs=10k count=1 status=none
      else dd if=/dev/zero of="$probe/f$i" bs=10k count=1 conv=fsync status=none; fi
    done
    echo "- disk ($(df --output=source "$probe" | tail -1)): 10 KiB written by dd, $([ "$sync" = none ] && echo 'no fsync' || echo 'with fsync'): $(( ($(date +%s%N) - start) / 20000 )) us per file"
  done
  rm -rf "$probe"
  echo
} > "$OUT/summary.md"

# ONLY="name1 name2" runs just those steps (a short call that repeats one measurement).
ONLY=${ONLY:-}
run() {  # run NAME CMD...: log to $LOGS/NAME.txt, record pass/fail
  local name=$1; shift
  if [ -n "$ONLY" ] && [[ " $ONLY " != *" $name "* ]]; then return 0; fi
  echo "== $name: $*"
  local start=$SECONDS
  "$@" > "$LOGS/$name.txt" 2>&1
  local rc=$?
  tail -n 40 "$LOGS/$name.txt"
  echo "- $name: exit $rc ($((SECONDS - start)) s)" >> "$OUT/summary.md"
  [ $rc -eq 0 ] || status=1
}

run gpu_tests "$BIN/kcache_gpu_tests"
run cpu_tests "$BIN/kcache_cpu_tests"
# The Rust crate's tests (built by scripts/build-for-gpu.sh), its GPU ones required to run.
rust_tests() {
  local rc=0
  for test in "$BIN"/rust/*; do
    [ -x "$test" ] || continue
    echo "== $(basename "$test")"
    KCACHE_REQUIRE_GPU=1 LD_LIBRARY_PATH="$BIN/lib:${LD_LIBRARY_PATH:-}" "$test" --test-threads=1 || rc=1
  done
  return $rc
}
run rust_tests rust_tests
# A fresh cache directory: the first demo compiles (nvJitLink) and fills it, the second (JSON)
# must compile nothing and read the disk, as a new process would.
export KCACHE_DIR="$(mktemp -d)/kcache"
run demo "$BIN/kcache" demo
run demo_json "$BIN/kcache" demo --json
run bench "$BIN/kcache_bench" --out "$OUT/bench.md"
# The hit path again over the fake driver, which answers current_arch() without a driver call:
# the difference to the table above is what cuCtxGetCurrent costs per lookup.
run bench_fake "$BIN/kcache_bench" --fake --out "$LOGS/bench_fake.md"
# The hit path's 2 threads on chosen CPUs (taskset): whether a pair's ratio to one thread depends on
# where the pair runs (the host's siblings), kcache and the control sharing nothing alike.
hit_pinned() {
  local cpus
  for cpus in 0,1 0,2 0,4 0,8 0,15 0-15; do
    echo "### taskset -c $cpus"
    taskset -c "$cpus" "$BIN/kcache_bench" --fake --no-launch --threads 1,2 | sed -n '/^| threads/,/^$/p'
  done
}
run hit_pinned hit_pinned
# The control for the epoch pins: readers fence themselves instead of relying on membarrier.
run bench_fences env KCACHE_EPOCH_FENCES=1 "$BIN/kcache_bench" --no-launch --out "$LOGS/bench_fences.md"
# Issue 3: 64 PTX kernels cold (driver JIT with its ComputeCache off, against kcache's parallel
# warm-up; nvJitLink alone on 1 and 16 threads) and warm from disk against the in-memory floor,
# in rounds within one process, with kcache's CPU path apart.
run warm_start env CUDA_CACHE_DISABLE=1 "$BIN/kcache_bench" --tiers "$(mktemp -d)/tiers" --out "$LOGS/warm_start.md"
# The warm start as new processes see it: rounds of three (kcache from its disk tier, the floor,
# the driver's ComputeCache, which the bench turns on for its own processes only).
run ptx_new_process env CUDA_CACHE_DISABLE=1 "$BIN/kcache_bench" --ptx-new-process "$(mktemp -d)/ptx" --rounds "${PTX_ROUNDS:-9}" --out "$LOGS/ptx_new_process.md"
# kcache_bench MODE on a corpus of bench/corpus unpacked into a scratch folder:
#   on_corpus ARCHIVE SUBFOLDER MODE ARGS...
on_corpus() {
  local archive=$1 sub=$2 mode=$3 dir rc
  shift 3
  dir=$(mktemp -d)
  tar xJf "bench/corpus/$archive" -C "$dir" || return 1
  "${BENCH:-$BIN/kcache_bench}" "$mode" "$dir/$sub" "$@"
  rc=$?
  rm -rf "$dir"
  return $rc
}
# kcache stores its own cubins: nvJitLink must not keep a second copy of each in the driver's
# ComputeCache (where a later compile of the same PTX would be served from it). A kernel compiled
# by `kcache compile` with a ComputeCache of its own must leave that cache empty. KCACHE_BEFORE=binary runs
# the same check with another kcache (one from before the fix, to see the check fail).
nvjitlink_cache() {
  local dir ptx rc=0 kcache arch
  dir=$(mktemp -d)
  ptx="$dir/k.ptx"
  printf '.version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\n ret;\n}\n' > "$ptx"
  for kcache in "$BIN/kcache" ${KCACHE_BEFORE:-}; do
    rm -rf "$dir/cc" "$dir/kc"
    # This kcache with the GPU's own arch (no --arch: the devices'), another with sm_90.
    arch=(); [ "$kcache" = "$BIN/kcache" ] || arch=(--arch sm_90)
    CUDA_CACHE_PATH="$dir/cc" "$kcache" -d "$dir/kc" compile "${arch[@]}" "$ptx" || rc=1
    local files
    files=$(find "$dir/cc" -type f 2>/dev/null | wc -l)
    echo "$kcache: the ComputeCache holds $files files after one compile"
    if [ "$kcache" = "$BIN/kcache" ] && [ "$files" -ne 0 ]; then rc=1; fi
  done
  rm -rf "$dir"
  return $rc
}
run nvjitlink_cache nvjitlink_cache
# Issue 19: 140 real Triton kernels (bench/corpus/) cold (the driver's JIT against kcache one by
# one and warm_up, the ComputeCache off) and warm in new processes (floor, warm ComputeCache).
run corpus on_corpus triton-corpus.tar.xz kernels --corpus --rounds "${CORPUS_ROUNDS:-5}" --out "$LOGS/corpus.md"
# KCACHE_BENCH_BEFORE=binary: the same with another kcache_bench (a change's before), in turns;
# KCACHE_BENCH_BEFORE_ENV="NAME=value ...": the same binary with those variables set (a switch's
# before).
BEFORE=${KCACHE_BENCH_BEFORE:-}
[ -z "$BEFORE" ] && [ -n "${KCACHE_BENCH_BEFORE_ENV:-}" ] && BEFORE="$BIN/kcache_bench"
if [ -n "$BEFORE" ]; then
  # shellcheck disable=SC2086 # the variables, split at spaces
  run corpus_before env ${KCACHE_BENCH_BEFORE_ENV:-} BENCH="$BEFORE" bash -c "$(declare -f on_corpus); BIN=$BIN on_corpus triton-corpus.tar.xz kernels --corpus --rounds ${CORPUS_ROUNDS:-5} --out $LOGS/corpus_before.md"
  run corpus_again on_corpus triton-corpus.tar.xz kernels --corpus --rounds "${CORPUS_ROUNDS:-5}" --out "$LOGS/corpus_again.md"
fi
# Where a cold warm-up's time goes (no GPU involved): nvJitLink on the corpus one after another,
# on 16 threads and in 16 processes; what the order costs; a durable store against an unsynced one;
# kcache's own share of a warm start (over the fake driver: bundles loaded or one module a key).
run compile_scaling on_corpus triton-corpus.tar.xz kernels --compile-scaling --workers "$(nproc)" --out "$LOGS/compile_scaling.md"
# The same with its cache directories on tmpfs (TMPDIR=/dev/shm): what this host's disk adds to
# kernel() one after another, whose durable writes go behind it (an fsync waits for the journal,
# which the next compile's lock file may wait for too).
run compile_scaling_tmpfs env TMPDIR=/dev/shm bash -c "$(declare -f on_corpus); BIN=$BIN on_corpus triton-corpus.tar.xz kernels --compile-scaling --workers $(nproc) --out $LOGS/compile_scaling_tmpfs.md"
# The same with no copies of nvJitLink, then with 15 (driver/nvjitlink_copies.hpp; 3 by
# default): what the copies gain 16 threads of one process.
compile_scaling_copies() {
  local copies rc=0
  for copies in 0 15; do
    echo "### KCACHE_NVJITLINK_COPIES=$copies"
    echo
    KCACHE_NVJITLINK_COPIES=$copies on_corpus triton-corpus.tar.xz kernels --compile-scaling --workers "$(nproc)" || rc=1
    echo
  done
  return $rc
}
run compile_scaling_copies compile_scaling_copies
# The same with glibc's malloc keeping its memory (no trims, no mmap of large blocks): whether the
# compiles of one process slow each other through the kernel's memory map (page faults, unmaps).
run compile_scaling_kept env GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824 \
  bash -c "$(declare -f on_corpus); BIN=$BIN on_corpus triton-corpus.tar.xz kernels --compile-scaling --workers $(nproc) --out $LOGS/compile_scaling_kept.md"
# Whether the driver's own JIT could compile kcache's PTX: cuModuleLoadData of the PTX, the
# driver's linker to a cubin (cuLink*) and nvJitLink, one after another and on 16 threads.
run driver_jit on_corpus triton-corpus.tar.xz kernels --driver-jit --workers "$(nproc)" --rounds "${DRIVER_JIT_ROUNDS:-3}" --out "$LOGS/driver_jit.md"
# What ptxas itself costs on the corpus, one kernel at a time (no GPU involved): a whole program
# (as the driver's JIT compiles) against relocatable code (as nvJitLink compiles before its link),
# each with and without --split-compile (ptxas's optimisations on all cores).
ptxas_modes() {
  local dir ptxas=${CUDA_HOME:-/usr/local/cuda}/bin/ptxas mode f start total slowest t
  dir=$(mktemp -d)
  tar xJf bench/corpus/triton-corpus.tar.xz -C "$dir" || return 1
  echo "| ptxas mode, the corpus one kernel at a time | total ms | slowest kernel ms |"
  echo "|---|---:|---:|"
  for mode in "" "-c" "--split-compile 0" "-c --split-compile 0"; do
    total=0 slowest=0
    for f in "$dir"/kernels/*.ptx; do
      start=$(date +%s%N)
      # shellcheck disable=SC2086
      "$ptxas" -arch=sm_90a $mode "$f" -o "$dir/out.cubin" || return 1
      t=$(( ($(date +%s%N) - start) / 1000 ))
      total=$((total + t)); [ "$t" -gt "$slowest" ] && slowest=$t
    done
    echo "| ${mode:-whole program} | $((total / 1000)) | $((slowest / 1000)) |"
  done
  rm -rf "$dir"
}
run ptxas_modes ptxas_modes
# Issue 19, CUDA C++: the CUB and CUTLASS-style templates of bench/corpus/cuda-corpus.tar.xz, one
# name expression per kernel, cold (one by one against warm_up) and warm in new processes; then a
# sample launched on known inputs against a CPU reference (the run fails on a mismatch).
run cuda_corpus on_corpus cuda-corpus.tar.xz . --corpus --rounds "${CORPUS_ROUNDS:-5}" --out "$LOGS/cuda_corpus.md"
# Issue 19: the memory and scale curve: 10 to 10,000 distinct kernels cold and warm (time, host and
# device memory per loaded kernel, the disk tier's bytes), each a new process. The CLI's scans of a
# directory of 1,000 to 100,000 entries need no GPU and run on the CPU machine
# (bench/results/*-cpu-scale.md); filling 100,000 entries here would spend device time on the disk.
# SCALE_ROUNDS: the warm children's rounds (3 by default; 10,000 kernels take about a minute each).
run scale "$BIN/kcache_bench" --scale "$(mktemp -d)/scale" --scale-entries 0 --scale-kcache "$BIN/kcache" --rounds "${SCALE_ROUNDS:-3}" --out "$LOGS/scale.md"
# The driver's cost per module as a context holds 1,000 to 10,000 of them, loads and unloads by
# the order of the unloads (a cache's end unloads every module it holds).
run module_churn "$BIN/kcache_bench" --module-churn 1000,10000 --out "$LOGS/module_churn.md"
# Whether kcache's cubins (nvJitLink: PTX compiled as relocatable code, then linked) run as fast as
# the driver's JIT of the same PTX (a whole program).
run kernel_speed "$BIN/kcache_bench" --kernel-speed --out "$LOGS/kernel_speed.md"
# Issue 3, CUDA C++: how NVRTC scales inside one process (light and CUB-heavy kernels), a CUDA C++
# kernel's readiness in cold and warm new processes, and a warm-up of CUDA C++ kernels.
ARCH=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d .)
run nvrtc_scaling "$BIN/kcache_bench" --nvrtc-scaling "${ARCH:-90}" --nvrtc-kernels 16,8 --nvrtc-threads 16 --out "$LOGS/nvrtc_scaling.md"
# The same with one NVRTC in the process (no copies: driver/nvjitlink_copies.hpp): what the copies
# gain CUDA C++ compiles on threads.
run nvrtc_scaling_one env KCACHE_NVJITLINK_COPIES=0 "$BIN/kcache_bench" --nvrtc-scaling "${ARCH:-90}" --nvrtc-kernels 16,8 --nvrtc-threads 16 --out "$LOGS/nvrtc_scaling_one.md"
run cuda_warm "$BIN/kcache_bench" --cuda "$(mktemp -d)/cuda" --cuda-warm-up 12 --out "$LOGS/cuda_warm.md"
# Issue 17: a fresh node's warm start from Redis on loopback (the kernels launched on the GPU)
# against its disk and against compiling; one remote read's worst case with a bad server; the
# fleet of 16 processes on one Redis.
run remote "$BIN/kcache_bench" --remote "$(mktemp -d)/remote" --rounds "${REMOTE_ROUNDS:-7}" --out "$LOGS/remote.md"
run fleet "$BIN/kcache_fleet" run
run fleet_bench "$BIN/kcache_fleet" bench

# A section of the summary: its title, then each file of $LOGS or $OUT that its step wrote.
section() {
  echo "$1"
  echo
  shift
  for file in "$@"; do
    cat "$file" 2>/dev/null && echo
  done
}
{
  echo
  echo "## GPU tests"
  echo '```'
  grep -E '^\[ +(OK|FAILED|SKIPPED|PASSED) +\]|tests? ran|JIT error as returned' "$LOGS/gpu_tests.txt"
  echo '```'
  echo
  echo "## CPU tests on this machine"
  echo '```'
  grep -E 'tests? ran|PASSED|FAILED' "$LOGS/cpu_tests.txt" | tail -5
  echo '```'
  echo
  echo "## Demo"
  echo '```'
  cat "$LOGS/demo.txt"
  cat "$LOGS/demo_json.txt"
  echo '```'
  echo
  cat "$OUT/bench.md" 2>/dev/null
  echo
  echo "## Hit path over the fake driver on this host (no driver call per lookup)"
  echo
  sed -n '/^| threads/,$p' "$LOGS/bench_fake.md" 2>/dev/null
  section "### The hit path on 2 threads pinned to chosen CPUs" "$LOGS/hit_pinned.txt"
  echo
  section "## Cold and warm start of 64 distinct PTX kernels" "$LOGS/warm_start.md" \
    "$LOGS/ptx_new_process.md" "$LOGS/kernel_speed.md"
  section "## nvJitLink's own cache (the driver's ComputeCache) stays empty" "$LOGS/nvjitlink_cache.txt"
  section "## A corpus of 140 Triton kernels (bench/corpus), cold and warm" "$LOGS/corpus.md"
  if [ -n "$BEFORE" ]; then
    section "### The same with $BEFORE ${KCACHE_BENCH_BEFORE_ENV:-} (before), then again with this one" \
      "$LOGS/corpus_before.md" "$LOGS/corpus_again.md"
  fi
  section "## The corpus through nvJitLink alone: threads, processes, order, store" "$LOGS/compile_scaling.md"
  section "### The same with the cache directories on tmpfs" "$LOGS/compile_scaling_tmpfs.md"
  section "### The same with no copies of nvJitLink, and with 15" "$LOGS/compile_scaling_copies.txt"
  section "### The same, glibc's malloc keeping its memory (GLIBC_TUNABLES)" "$LOGS/compile_scaling_kept.md"
  section "## The corpus through the driver's JIT, its linker and nvJitLink" "$LOGS/driver_jit.md"
  echo "## ptxas on the corpus: whole program or relocatable, split compile or not"
  echo
  grep -E '^\|' "$LOGS/ptxas_modes.txt" 2>/dev/null
  echo
  section "## A corpus of CUDA C++ templates (CUB, CUTLASS-style), cold, warm and checked" "$LOGS/cuda_corpus.md"
  section "## Memory and scale curve (issue 19)" "$LOGS/scale.md"
  section "## The driver's cost per module, by modules held and order of unloads" "$LOGS/module_churn.md"
  section "## CUDA C++: NVRTC inside one process" "$LOGS/nvrtc_scaling.md"
  section "### The same with one NVRTC (KCACHE_NVJITLINK_COPIES=0)" "$LOGS/nvrtc_scaling_one.md"
  section "## CUDA C++: a kernel in new processes, and a warm-up" "$LOGS/cuda_warm.md"
  section "## The remote tier (Redis on loopback)" "$LOGS/remote.md"
  echo '```'
  grep -E '^fleet:' "$LOGS/fleet.txt" 2>/dev/null
  echo '```'
  echo
  grep -E '^\|' "$LOGS/fleet_bench.txt" 2>/dev/null
} >> "$OUT/summary.md"
tar -C "$OUT" -czf "$OUT/logs.tar.gz" logs && rm -rf "$LOGS"
echo
cat "$OUT/summary.md"
exit $status
