#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The style checks: `scripts/lint.sh [format] [tidy]` runs the named steps (both by default).
#   format: clang-format-14 --dry-run -Werror over every tracked C/C++ file (the repo's
#           .clang-format), fuzz seeds aside.
#   tidy:   clang-tidy-14 over the translation units of src/, tools/ and bench/ (the repo's
#           .clang-tidy; its HeaderFilterRegex covers the headers they include), in
#           KCACHE_LINT_JOBS processes at once (default: one per core), through build/'s
#           compile_commands.json; build/ is configured (not built) when needed.
# Each step says one line when it passes and lists its findings when not; the script then exits 1
# after running the other step. The whole output stays in build/lint/ (format.log, tidy.log).
set -euo pipefail
cd "$(dirname "$0")/.."

steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(format tidy)
mkdir -p build/lint
failed=0

lint_format() {
  local log=build/lint/format.log files=()
  mapfile -d '' files < <(git ls-files -z -- '*.cpp' '*.hpp' '*.h' '*.inc' ':!:fuzz/corpus/**')
  if clang-format-14 --dry-run -Werror "${files[@]}" >"$log" 2>&1; then
    echo "lint: clang-format: ${#files[@]} files formatted as .clang-format says"
    return 0
  fi
  echo "lint: clang-format: these files differ from .clang-format (fix: clang-format-14 -i FILE):"
  grep -oE '^[^ :]+:[0-9]+:[0-9]+: error:' "$log" | cut -d: -f1 | sort | uniq -c |
    awk '{ printf "  %s (%d %s)\n", $2, $1, $1 == 1 ? "place" : "places" }'
  echo "lint: the first places (all of them in $log):"
  head -n 30 "$log"
  return 1
}

lint_tidy() {
  local log=build/lint/tidy.log jobs="${KCACHE_LINT_JOBS:-$(nproc)}" status=0
  # Reconfigure even when build/ exists: the CMake globs pick up added files, keeping the cache's
  # options; clang-tidy needs only the compile commands, not a build.
  local configure=(cmake -S . -B build)
  [ -f build/CMakeCache.txt ] || configure+=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
  PATH="/usr/local/cuda/bin:$PATH" "${configure[@]}" >build/lint/configure.log 2>&1 || {
    echo "lint: clang-tidy: configuring build/ failed:"
    tail -n 20 build/lint/configure.log
    return 1
  }
  local start=$SECONDS
  # -Wno-error: the build's own warnings are g++'s to judge (KCACHE_WERROR); under -Werror a
  # warning only clang gives would stop clang-tidy as a compile error.
  run-clang-tidy-14 -clang-tidy-binary clang-tidy-14 -p build -quiet -j "$jobs" \
    -extra-arg=-Wno-error "^$PWD/(src|tools|bench)/" >"$log.raw" 2>&1 || status=$?
  local files
  files=$(grep -o 'clang-tidy-14 --use-color' "$log.raw" | wc -l)
  # run-clang-tidy colours its output and echoes each command; keep only what clang-tidy said.
  sed -e 's/\x1b\[[0-9;]*m//g' -e "s|clang-tidy-14 --use-color [^/]*$PWD/[^ ]*||g" \
    -e "s|$PWD/||g" "$log.raw" | grep -v '^$' >"$log" || true
  rm -f "$log.raw"
  if [ "$status" -eq 0 ]; then
    echo "lint: clang-tidy: $files translation units clean ($((SECONDS - start)) s, $jobs jobs)"
    return 0
  fi
  # A header's finding comes once per translation unit that includes it: list each once.
  local findings
  findings=$(grep -E '^[^ :]+:[0-9]+:[0-9]+: (error|warning):' "$log" |
    sed 's/,-warnings-as-errors\]$/]/' | sort -t: -k1,1 -k2,2n -k3,3n -u || true)
  if [ -n "$findings" ]; then
    echo "lint: clang-tidy: $(wc -l <<<"$findings") findings (the code around each in $log):"
    sed 's/^/  /' <<<"$findings"
  else
    echo "lint: clang-tidy failed without a finding (exit $status); the end of $log:"
    tail -n 30 "$log"
  fi
  return 1
}

for step in "${steps[@]}"; do
  case "$step" in
    format) lint_format || failed=1 ;;
    tidy) lint_tidy || failed=1 ;;
    *)
      echo "lint: unknown step '$step' (steps: format, tidy)" >&2
      exit 2
      ;;
  esac
done
exit "$failed"
