#!/usr/bin/env bash
# On the GPU machine: the hit-path and launch benchmark of two builds of kcache_bench, run in
# turns (before, after, before, ...) so that the host's drift falls on both alike. Put the older
# build's binary at .gpu-bin/kcache_bench_before (scripts/build-for-gpu.sh at that commit, then
# copy it there). Tables go to $OUT/compare.md.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
BIN=.gpu-bin
ROUNDS=${ROUNDS:-3}
mkdir -p "$OUT"
{
  echo "# Hit path and launch: two builds in turns"
  echo
  echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "- machine: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1), $(nproc) CPU cores"
  echo "- after: $(cat "$BIN/COMMIT" 2>/dev/null); before: $(cat "$BIN/COMMIT_BEFORE" 2>/dev/null)"
  for round in $(seq 1 "$ROUNDS"); do
    for side in before after; do
      bench="$BIN/kcache_bench"
      [ "$side" = before ] && bench="$BIN/kcache_bench_before"
      echo
      echo "## round $round, $side"
      "$bench" --out "$OUT/$side-$round.md" >/dev/null 2>&1 || echo "(exit $?)"
      sed -n '/^| threads/,/^$/p' "$OUT/$side-$round.md"
    done
  done
} > "$OUT/compare.md"
cat "$OUT/compare.md"
