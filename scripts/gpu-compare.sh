#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# On the GPU machine: a benchmark of two builds of kcache_bench, run in turns (before, after,
# before, ...) so that the host's drift falls on both alike. MODE=hit (default) runs the hit-path
# and launch benchmark; MODE=warm the warm start of 64 PTX kernels in new processes
# (PTX_ROUNDS rounds each, default 5); MODE=corpus the Triton corpus of bench/corpus cold and warm
# (`--corpus`, CORPUS_ROUNDS rounds each, default 3); MODE=corpus-warm its warm new processes
# alone (`--corpus-warm`, CORPUS_ROUNDS rounds each). Put the older build's binary at
# .gpu-bin/kcache_bench_before (scripts/build-for-gpu.sh at that commit, then copy it there);
# SIDES="before after b32 ..." compares more builds, each .gpu-bin/kcache_bench_SIDE ("after":
# .gpu-bin/kcache_bench). Tables go to $OUT/compare.md.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-$PWD/gpu-out}
BIN=.gpu-bin
ROUNDS=${ROUNDS:-3}
MODE=${MODE:-hit}
mkdir -p "$OUT"
# The remote tier's libraries, carried (scripts/build-for-gpu.sh), for a build that links them.
if [ -d "$BIN/deps" ]; then
  export LD_LIBRARY_PATH="$PWD/$BIN/deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
{
  echo "# $MODE: builds in turns (${SIDES:-before after})"
  echo
  echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "- machine: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1), $(nproc) CPU cores"
  echo "- after: $(cat "$BIN/COMMIT" 2>/dev/null); before: $(cat "$BIN/COMMIT_BEFORE" 2>/dev/null)"
  if [ "$MODE" = corpus ] || [ "$MODE" = corpus-warm ]; then
    corpus=$(mktemp -d)
    tar xJf bench/corpus/triton-corpus.tar.xz -C "$corpus"
  fi
  for round in $(seq 1 "$ROUNDS"); do
    for side in ${SIDES:-before after}; do
      bench="$BIN/kcache_bench"
      [ "$side" = after ] || bench="$BIN/kcache_bench_$side"
      echo
      echo "## round $round, $side"
      if [ "$MODE" = corpus ]; then
        CUDA_CACHE_DISABLE=1 "$bench" --corpus "$corpus/kernels" --rounds "${CORPUS_ROUNDS:-3}" \
          --out "$OUT/$side-$round.md" >/dev/null 2>&1 || echo "(exit $?)"
        # The table rows, each description cut short.
        grep -E '^\| (\([abc]\)|kcache|floor|the driver|for scale: every)' "$OUT/$side-$round.md" |
          sed -E 's/^\| ([^|]{1,60})[^|]*\|/| \1 |/'
      elif [ "$MODE" = corpus-warm ]; then
        CUDA_CACHE_DISABLE=1 "$bench" --corpus "$corpus/kernels" --corpus-warm \
          --rounds "${CORPUS_ROUNDS:-3}" --out "$OUT/$side-$round.md" >/dev/null 2>&1 || echo "(exit $?)"
        grep -E '^\| (kcache|floor|the driver|for scale: every)' "$OUT/$side-$round.md" |
          sed -E 's/^\| ([^|]{1,60})[^|]*\|/| \1 |/'
      elif [ "$MODE" = warm ]; then
        CUDA_CACHE_DISABLE=1 "$bench" --ptx-new-process "$(mktemp -d)/ptx" --rounds "${PTX_ROUNDS:-5}" \
          --out "$OUT/$side-$round.md" >/dev/null 2>&1 || echo "(exit $?)"
        sed -n '/^| 64 PTX kernels, warm/,/^| floor/p' "$OUT/$side-$round.md"
      else
        "$bench" --out "$OUT/$side-$round.md" >/dev/null 2>&1 || echo "(exit $?)"
        sed -n '/^| threads/,/^$/p' "$OUT/$side-$round.md"
      fi
    done
  done
  [ -n "${corpus:-}" ] && rm -rf "$corpus"
} > "$OUT/compare.md"
cat "$OUT/compare.md"
