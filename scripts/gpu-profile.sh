#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# On the GPU machine: where a new process's PTX warm start spends its time, sampled by perf inside
# the timed loads only (the bench opens and shuts perf's window around them). perf is not
# installed there: scripts/pack-perf.sh packs this machine's perf and its libraries into
# .perf-bin/, carried with .gpu-bin/ (binaries built with frame pointers by build-for-gpu.sh
# PROFILE=1). Reports go to $OUT. MODES, PROCESSES and SET (small: 64 kernels, or large: one)
# choose what is sampled; CORPUS (a tar.xz of bench/corpus) samples its kernels instead.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
R="$OUT/profile"  # packed into $OUT/profile.tgz at the end: the device tool returns few files
mkdir -p "$R"
BIN=${BIN:-.gpu-bin}  # PROFILE=1 binaries (scripts/build-for-gpu.sh)
# What the GPU machine lacks (hiredis, which kcache links), carried in .gpu-bin as gpu-check.sh
# finds it, whichever folder BIN names.
export LD_LIBRARY_PATH="$PWD/.gpu-bin/deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
PERF=(.perf-bin/lib/ld-linux-x86-64.so.2 --library-path .perf-bin/lib .perf-bin/perf)
MODES=${MODES:-"kcache floor-file floor kcache-cpu"}
PROCESSES=${PROCESSES:-40}
work=$(mktemp -d)
if [ -n "${CORPUS:-}" ]; then
  # CORPUS=bench/corpus/triton-corpus.tar.xz: its kernels, kcache's disk tier filled by one cold
  # warm_up (entries and bundles); only kcache's modes (kcache-warm-up, kcache) apply.
  mkdir -p "$work/corpus" "$work/ptx" && tar xJf "$CORPUS" -C "$work/corpus"
  SET="$work/corpus/kernels"
  TIER="$work/ptx"
  env CUDA_CACHE_DISABLE=1 "$BIN/kcache_bench" --ptx-warm-child kcache-fill "$work/ptx" "$SET" \
    > "$R/fill.txt" 2>&1 || { echo "fill failed"; tail "$R/fill.txt"; exit 1; }
else
  # Fills kcache's disk tier, the floor's cubins and the ComputeCache, then ROUNDS rounds of every
  # mode (the bench's table, unprofiled).
  env CUDA_CACHE_DISABLE=1 "$BIN/kcache_bench" --ptx-new-process "$work/ptx" --rounds "${ROUNDS:-1}" \
    --out "$R/rounds.md" > "$R/fill.txt" 2>&1 || { echo "fill failed"; tail "$R/fill.txt"; exit 1; }
fi
TIER=${TIER:-$work/ptx/${SET:-small}}  # the children's directory: kcache's tier under it
for mode in $MODES; do
  mkfifo "$work/ctl" "$work/ack"
  env CUDA_CACHE_DISABLE=1 KCACHE_BENCH_PERF="$work/ctl,$work/ack,cpu-clock" "${PERF[@]}" record \
    -e dummy -e cpu-clock -F 20000 -g -D -1 --control "fifo:$work/ctl,$work/ack" -o "$work/$mode.data" -- \
    bash -c "for i in \$(seq $PROCESSES); do $BIN/kcache_bench --ptx-warm-child $mode $TIER ${SET:-small} > /dev/null || exit 1; done" \
    > "$R/record-$mode.txt" 2>&1 || echo "record $mode failed: $(tail -3 "$R/record-$mode.txt")"
  rm -f "$work/ctl" "$work/ack"
  "${PERF[@]}" report -i "$work/$mode.data" --no-children --sort dso,sym --stdio -g none \
    --percent-limit 0.3 > "$R/flat-$mode.txt" 2>&1
  "${PERF[@]}" report -i "$work/$mode.data" --children --sort sym --stdio -g caller,0.5,callee \
    --percent-limit 2 > "$R/tree-$mode.txt" 2>&1
  "${PERF[@]}" report -i "$work/$mode.data" --no-children --sort comm,dso --stdio -g none \
    > "$R/dso-$mode.txt" 2>&1
  "${PERF[@]}" report -i "$work/$mode.data" --children --sort sym --stdio -g none \
    --percent-limit 0.3 > "$R/inclusive-$mode.txt" 2>&1
  # Every sample's call chain, for folding here (scripts/fold-profile.py).
  "${PERF[@]}" script -i "$work/$mode.data" -F tid,time,ip,sym,dso 2>/dev/null | gzip > "$R/script-$mode.txt.gz"
  echo "$mode: $(grep -m1 'of event' "$R/flat-$mode.txt")"
done
rm -rf "$work"
tar czf "$OUT/profile.tgz" -C "$R" . && rm -rf "$R"
