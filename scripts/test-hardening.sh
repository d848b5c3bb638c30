#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The hardening checks (docs/testing.md): the CPU suite under ASan+UBSan (build-asan/), the
# suites where threads and processes meet under TSan (build-tsan/), and every fuzz target for
# KCACHE_FUZZ_SECONDS (default 30) from its seed corpus (build-fuzz/). Steps may be named
# (`test-hardening.sh fuzz`); all three by default. Quiet on success, one line per step; a failing
# step prints what failed, the others still run, and the script exits 1.
# shellcheck disable=SC2317 # the steps are called by name (step_$step)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
export PATH="/usr/local/cuda/bin:$PATH"
root=$PWD
jobs=$(nproc)
fuzz_seconds=${KCACHE_FUZZ_SECONDS:-30}
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(asan tsan fuzz)
failed=0

# Sanitizer builds compile at -O1 with line tables only: half the compile time of -O2 -g
# (tools/kcache/main.cpp alone took 42 s under ASan+UBSan), and still a file:line per frame.
sanitizer_flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
    -DKCACHE_WERROR=ON)

elapsed() {
    local seconds=$(($(date +%s) - $1))
    printf '%dm%02ds' $((seconds / 60)) $((seconds % 60))
}

# Runs "$@" with its output in $log; on failure says which step and shows the log's tail.
quietly() {
    local step=$1 log=$2
    shift 2
    if ! "$@" >"$log" 2>&1; then
        echo "hardening: $step: FAILED: $* (log: $log)" >&2
        tail -n 80 "$log" >&2
        return 1
    fi
}

# ctest's own summary line ("100% tests passed, 0 tests failed out of N").
ctest_summary() {
    grep -E '^[0-9]+% tests passed' "$1" | tail -n 1
}

step_asan() {
    local start build=build-asan
    start=$(date +%s)
    mkdir -p "$build"
    quietly asan "$build/configure.log" cmake -S . -B "$build" -DKCACHE_SANITIZE=address \
        "${sanitizer_flags[@]}" || return 1
    quietly asan "$build/build.log" cmake --build "$build" -j"$jobs" || return 1
    local built
    built=$(elapsed "$start")
    # halt_on_error: a UBSan finding fails its test rather than printing and passing. The
    # hostile suite bounds each process's address space (ASan reserves terabytes of shadow) and
    # runs as nobody without this environment: it runs in the normal suite. Leak checking is off:
    # LeakSanitizer's own tracer dies at exit (signal 11 in its stop-the-world) in a process with
    # NVRTC's threads and the lock heartbeat's, which fails a test whose every check passed; a
    # second run gives any other flake a second chance.
    ASAN_OPTIONS=detect_leaks=0:abort_on_error=0 \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        quietly asan "$build/ctest.log" \
        ctest --test-dir "$build" --output-on-failure -j"$jobs" --timeout 600 -LE hostile \
        --repeat until-pass:2 || return 1
    echo "hardening: asan+ubsan: $(ctest_summary "$build/ctest.log") (build $built, all $(elapsed "$start"))"
}

step_tsan() {
    local start build=build-tsan
    start=$(date +%s)
    mkdir -p "$build"
    quietly tsan "$build/configure.log" cmake -S . -B "$build" -DKCACHE_SANITIZE=thread \
        "${sanitizer_flags[@]}" || return 1
    quietly tsan "$build/build.log" cmake --build "$build" -j"$jobs" --target kcache_tsan_tests \
        || return 1
    local built
    built=$(elapsed "$start")
    # TSan maps its shadow memory at fixed addresses, which a kernel with more address
    # randomization bits (vm.mmap_rnd_bits 32) can collide with; without randomization it
    # cannot. Only where the sandbox lets a process change its personality.
    local norandom=()
    if setarch "$(uname -m)" -R true 2>/dev/null; then norandom=(setarch "$(uname -m)" -R); fi
    TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
        quietly tsan "$build/ctest.log" "${norandom[@]}" \
        ctest --test-dir "$build" -L tsan --output-on-failure -j"$jobs" --timeout 600 || return 1
    echo "hardening: tsan: $(ctest_summary "$build/ctest.log") (build $built, all $(elapsed "$start"))"
}

step_fuzz() {
    local start build=build-fuzz
    start=$(date +%s)
    mkdir -p "$build"
    # -Werror stays with the normal build: clang warns where g++ does not (docs/testing.md).
    quietly fuzz "$build/configure.log" cmake -S . -B "$build" -DCMAKE_CXX_COMPILER=clang++-14 \
        -DKCACHE_FUZZ=ON -DKCACHE_BUILD_TESTS=OFF -DKCACHE_WERROR=OFF \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo || return 1
    quietly fuzz "$build/build.log" cmake --build "$build" -j"$jobs" --target kcache_fuzz \
        || return 1
    local built
    built=$(elapsed "$start")
    local target name runs=() bad=0
    for target in "$build"/fuzz/fuzz_*; do
        [ -x "$target" ] || continue
        name=${target##*/fuzz_}
        local seeds=fuzz/corpus/$name work=$build/corpus/$name findings=$build/findings
        if [ ! -d "$seeds" ]; then
            echo "hardening: fuzz: $name has no seed corpus ($seeds)" >&2
            bad=1
            continue
        fi
        # New inputs go to the first folder, a scratch one: the committed seeds stay as they are.
        rm -rf "$work"
        mkdir -p "$work" "$findings"
        if ! "$target" -max_total_time="$fuzz_seconds" -timeout=25 \
            -artifact_prefix="$findings/$name-" "$work" "$seeds" >"$build/$name.log" 2>&1; then
            echo "hardening: fuzz: $name: FINDING (log: $build/$name.log, input in $findings/)" >&2
            grep -E 'ERROR|check failed|SUMMARY|Test unit written' "$build/$name.log" >&2
            tail -n 40 "$build/$name.log" >&2
            bad=1
            continue
        fi
        runs+=("$name $(grep -oE 'Done [0-9]+ runs' "$build/$name.log" | grep -oE '[0-9]+')")
    done
    [ "$bad" -eq 0 ] || return 1
    local summary="${#runs[@]} targets x ${fuzz_seconds} s, no findings (runs:"
    for name in "${runs[@]}"; do summary+=" $name;"; done
    [ -x "$build/fuzz/fuzz_config_file" ] || summary+=" config_file not built, no util::parse_config_file yet;"
    echo "hardening: fuzz: $summary build $built, all $(elapsed "$start"))"
}

for step in "${steps[@]}"; do
    case $step in
        asan | tsan | fuzz) "step_$step" || failed=1 ;;
        *)
            echo "test-hardening: unknown step '$step' (asan, tsan, fuzz)" >&2
            exit 2
            ;;
    esac
done
exit $failed
