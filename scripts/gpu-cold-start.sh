#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# On the GPU machine: where a new process's cold start of the corpus (bench/corpus) goes, by
# variants of one kcache child run in turns (ROUNDS each, default 3): as it is; with nvJitLink
# already loaded before main (LD_PRELOAD of the file kcache would open: its load off the clock);
# with no copies of nvJitLink (KCACHE_NVJITLINK_COPIES=0); with neither. MODES names the children
# (kcache_bench --corpus-cold-child: warm-up, one, nvjitlink). Medians to $OUT/cold-start.md.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
BIN=${BIN:-.gpu-bin}
ROUNDS=${ROUNDS:-3}
MODES=${MODES:-"warm-up one"}
mkdir -p "$OUT"
if [ -d "$BIN/deps" ]; then
  export LD_LIBRARY_PATH="$PWD/$BIN/deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
nvjitlink=$(ls /usr/local/cuda/lib64/libnvJitLink.so.[0-9]* 2>/dev/null | head -1)
work=$(mktemp -d)
tar xJf bench/corpus/triton-corpus.tar.xz -C "$work"
raw="$OUT/cold-start.raw"
: > "$raw"
n=0
for round in $(seq 1 "$ROUNDS"); do
  for mode in $MODES; do
    for variant in as-is preloaded no-copies preloaded-no-copies; do
      env=(CUDA_CACHE_DISABLE=1)
      case $variant in
        preloaded) env+=(LD_PRELOAD="$nvjitlink") ;;
        no-copies) env+=(KCACHE_NVJITLINK_COPIES=0) ;;
        preloaded-no-copies) env+=(LD_PRELOAD="$nvjitlink" KCACHE_NVJITLINK_COPIES=0) ;;
      esac
      n=$((n + 1))
      # A folder of its own for each child (see bench/corpus.cpp), all removed at the end.
      line=$(env "${env[@]}" "$BIN/kcache_bench" --corpus-cold-child "$mode" "$work/kernels" "$work/d$n" 2>/dev/null)
      echo "$mode $variant $line" >> "$raw"
    done
  done
done
rm -rf "$work"
python3 - "$raw" "$nvjitlink" > "$OUT/cold-start.md" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    parts = line.split()
    if len(parts) < 9:
        continue
    mode, variant, total, _sum, _max, _index, loaded, compiles, compile_ms = parts[:9]
    rows.setdefault((mode, variant), []).append((float(total), float(compile_ms), int(loaded)))
print(f"Cold children of the corpus, new processes in turns; nvJitLink preloaded: {sys.argv[2]}\n")
print("| child | variant | total ms, median | lowest - highest | compile_ns ms, median | loaded |")
print("|---|---|---:|---|---:|---:|")
for (mode, variant), runs in rows.items():
    totals = [r[0] for r in runs]
    print(f"| {mode} | {variant} | {statistics.median(totals):.1f} | {min(totals):.1f} - "
          f"{max(totals):.1f} | {statistics.median(r[1] for r in runs):.1f} | "
          f"{min(r[2] for r in runs)} |")
EOF
cat "$OUT/cold-start.md"
