#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Integration tests of the kcache command: each case runs the real binary in a fresh cache
# directory and checks its output and exit status. Usage: cli_test.sh KCACHE_BINARY CASE
set -uo pipefail
K=$1
CASE=$2
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export KCACHE_DIR="$WORK/cache"
unset KCACHE_MAX_SIZE KCACHE_MAX_FILES KCACHE_LOG
cd "$WORK"

fail() { echo "FAIL ($CASE): $*"; exit 1; }
# expect STATUS CMD...: runs CMD, keeps its output in $OUT_TEXT, checks the exit status.
expect() {
  local want=$1; shift
  OUT_TEXT=$("$@" 2>&1); local got=$?
  [ "$got" -eq "$want" ] || fail "'$*' exited $got, expected $want: $OUT_TEXT"
}
contains() { grep -qF -- "$1" <<<"$OUT_TEXT" || fail "output lacks '$1': $OUT_TEXT"; }
# JSON as one line, a space between tokens and none inside brackets, for contains.
flat_json() { OUT_TEXT=$(tr -s ' \n' '  ' <<<"$OUT_TEXT" | sed 's/{ /{/g; s/ }/}/g; s/\[ /[/g; s/ \]/]/g'); }
no_escape_byte() {  # no ESC, CSI or other C0 control but newline reaches the terminal
  if LC_ALL=C grep -q $'[\x01-\x09\x0b-\x1f\x7f\x9b]' <<<"$OUT_TEXT"; then
    fail "a control byte is written raw: $(cat -v <<<"$OUT_TEXT")"
  fi
}

kernel_cu() {  # a small CUDA C++ file
  cat > "$1" <<'CU'
extern "C" __global__ void scale(float* out, const float* in, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] * SCALE;
}
CU
}

case $CASE in
help)
  for cmd in "" demo compile ls inspect verify; do expect 0 $K $cmd --help; done
  expect 0 $K --help; contains "Exit status"
  ;;
bad_usage)
  expect 2 $K --no-such-flag
  expect 2 $K -M 2X
  expect 2 $K -o verify=maybe
  expect 2 $K -o no_such_setting=1
  expect 2 $K -o novalue
  expect 2 $K --evict-older-than 5x
  expect 2 $K --dry-run
  expect 2 $K inspect zz
  expect 2 $K compile missing.cu --arch sm_90
  kernel_cu k.cu
  expect 2 $K compile k.cu --arch sm_5
  for arch in sm_7 sm_74 sm_1000 sm_80a sm_-90 sm_9x 90aa; do
    expect 2 $K compile k.cu --arch $arch; contains "arch"
  done
  expect 2 $K compile k.txt --arch sm_90
  expect 2 $K compile k.cu --arch sm_90 -j 0
  [ ! -e "$KCACHE_DIR" ] || [ -z "$(find "$KCACHE_DIR" -name '*.kc')" ] || fail "a bad command wrote entries"
  ;;
prewarm)
  # Pre-warm on a machine without a GPU, then a second run compiles nothing.
  kernel_cu k.cu
  expect 0 $K compile k.cu --arch sm_90 -D SCALE=2.0f
  contains "1 compiled, 0 already in the cache, 0 failed"
  expect 0 $K compile k.cu --arch sm_90 -D SCALE=2.0f
  contains "0 compiled, 1 already in the cache, 0 failed"
  expect 0 $K compile k.cu --arch sm_90 -D SCALE=3.0f   # other options: another artifact
  contains "1 compiled"
  expect 0 $K ls; contains "2 entries"; contains "sm_90"; contains "k.cu"
  ;;
compile_unstored)
  # kcache compile honours the library's settings and fails loudly, naming each file, when it
  # cannot store: a refused directory, a write that fails; and it keeps the budgets.
  kernel_cu k.cu
  mkdir -p "$KCACHE_DIR"; chmod 0770 "$KCACHE_DIR"
  expect 1 $K compile k.cu --arch sm_90 -D SCALE=1.0f
  contains "not stored: "; contains "k.cu"; contains "group- or world-writable"
  contains "0 compiled, 0 already in the cache, 0 failed, 1 not stored"
  KCACHE_ALLOW_SHARED_DIR=1 expect 0 $K compile k.cu --arch sm_90 -D SCALE=1.0f
  contains "1 compiled"
  chmod 0700 "$KCACHE_DIR"
  chown nobody "$KCACHE_DIR" 2>/dev/null && {
    expect 1 $K compile k.cu --arch sm_90 -D SCALE=1.0f; contains "another user"
    chown "$(id -u)" "$KCACHE_DIR"
  }
  # A file where the entry's folder would go: the write fails. (A folder where the entry's file
  # would go is not what kcache keeps there: the lookup removes it, and the write then works.)
  FP=$($K ls --json | grep -o '"fingerprint": "[0-9a-f]*"' | grep -o '[0-9a-f]\{32\}')
  expect 0 $K -C
  rm -rf "${KCACHE_DIR:?}/${FP:0:2}"; echo x > "$KCACHE_DIR/${FP:0:2}"
  expect 1 $K compile k.cu --arch sm_90 -D SCALE=1.0f
  contains "k.cu"; contains "compiled for sm_90 but not stored on disk"
  contains "0 compiled, 0 already in the cache, 0 failed, 1 not stored"
  rm "$KCACHE_DIR/${FP:0:2}"
  # The file budget of kcache.conf holds for a pre-warm too, and it says what it removed.
  expect 0 $K -F 2
  ALL=""
  for s in 2 3 4 5; do expect 0 $K compile k.cu --arch sm_90 -D SCALE=$s.0f; ALL+=$OUT_TEXT; done
  [ "$(find "$KCACHE_DIR" -name '*.kc' | wc -l)" -le 2 ] || fail "max_files ignored"
  OUT_TEXT=$ALL; contains "budgets (max_size, max_files) removed"
  KCACHE_DISK=0 expect 2 $K compile k.cu --arch sm_90; contains "disk=0"
  ;;
disk_headers)
  # A header read from disk that no fingerprint covers is refused, unless asked for.
  printf '#define SCALE 2.0f\n' > "$WORK/scale.h"
  printf '#include "%s"\nextern "C" __global__ void k(float* x) { x[0] *= SCALE; }\n' \
    "$WORK/scale.h" > abs.cu
  expect 1 $K compile abs.cu --arch sm_90
  contains "$WORK/scale.h"; contains "allow-disk-headers"
  [ -z "$(find "$KCACHE_DIR" -name '*.kc' 2>/dev/null)" ] || fail "a refused compile stored"
  expect 0 $K compile abs.cu --arch sm_90 --allow-disk-headers
  contains "1 compiled"
  ;;
compile_error)
  printf 'extern "C" __global__ void k() { undeclared_thing(); }\n' > bad.cu
  kernel_cu good.cu
  expect 1 $K compile bad.cu good.cu --arch sm_90 -D SCALE=1.0f
  contains "undeclared_thing"; contains "1 compiled, 0 already in the cache, 1 failed"
  expect 0 $K ls; contains "1 entries"
  ;;
inspect_verify)
  kernel_cu k.cu
  expect 0 $K compile k.cu --arch sm_90 -D SCALE=1.0f
  FP=$($K ls --json | grep -o '"fingerprint": "[0-9a-f]*"' | grep -o '[0-9a-f]\{32\}')
  [ ${#FP} -eq 32 ] || fail "no fingerprint in ls --json"
  expect 0 $K inspect "${FP:0:8}"; contains "options: -DSCALE=1.0f"; contains "toolchain: NVRTC"
  expect 0 $K inspect "$FP" --json; contains "\"fingerprint\": \"$FP\""
  expect 0 $K verify; contains "1 entries checked, 0 bad"
  printf 'junk' >> "$KCACHE_DIR/${FP:0:2}/${FP:2}.kc"
  expect 1 $K verify; contains "1 bad, 0 removed"
  expect 0 $K verify --repair; contains "1 bad, 1 removed"
  expect 0 $K ls; contains "0 entries"
  ;;
clear_cleanup)
  kernel_cu k.cu
  for s in 1 2 3 4; do expect 0 $K compile k.cu --arch sm_90 -D SCALE=$s.0f; done
  expect 0 $K -C --dry-run; contains "4 entries"; contains "dry run"
  expect 0 $K ls; contains "4 entries"
  expect 0 $K -c -F 2; contains "removed"
  expect 0 $K ls; contains "1 entries"
  # -F (and -M) set kcache.conf for good, with -c too, as ccache; the environment applies a
  # budget once.
  expect 0 $K -k max_files; [ "$OUT_TEXT" = "2" ] || fail "-c -F 2 did not keep max_files: '$OUT_TEXT'"
  expect 0 $K compile k.cu --arch sm_90 -D SCALE=5.0f
  KCACHE_MAX_FILES=1 expect 0 $K -c; contains "removed"
  expect 0 $K -k max_files; [ "$OUT_TEXT" = "2" ] || fail "an environment budget was written"
  expect 0 $K --help; contains "Set the file budget (max_files) in kcache.conf"
  expect 0 $K -C
  expect 0 $K ls; contains "0 entries"
  ;;
evict_older_than)
  kernel_cu k.cu
  expect 0 $K compile k.cu --arch sm_90 -D SCALE=1.0f
  expect 0 $K compile k.cu --arch sm_90 -D SCALE=2.0f
  OLD=$(find "$KCACHE_DIR" -name '*.kc' | head -1)
  touch -m -d '3 days ago' "$OLD"
  expect 0 $K --evict-older-than 2d; contains "1 entries"
  [ ! -e "$OLD" ] || fail "the old entry is still there"
  expect 0 $K ls; contains "1 entries"
  ;;
numbers_do_not_wrap)
  # Ages, sizes and counts out of range are refused (exit 2) and change nothing.
  kernel_cu k.cu
  expect 0 $K compile k.cu --arch sm_90 -D SCALE=1.0f
  expect 0 $K -F 5
  BEFORE=$(cat "$KCACHE_DIR/kcache.conf")
  for age in 200000d 99999999999d 999999999999h; do
    expect 2 $K --evict-older-than $age; contains "bad age '$age'"
  done
  expect 2 $K --evict-older-than 200000d --dry-run
  expect 0 $K ls; contains "1 entries"
  expect 2 $K -F -1; expect 2 $K -F 18446744073709551616; expect 2 $K -F 1e3
  expect 2 $K -M 0.0000000001; contains "bad size"
  expect 2 $K -o max_files=-1; expect 2 $K -o compile_workers=99999999
  [ "$(cat "$KCACHE_DIR/kcache.conf")" = "$BEFORE" ] || fail "a refused number changed kcache.conf"
  KCACHE_COMPILE_WORKERS=99999999 expect 2 $K compile k.cu --arch sm_90
  contains "compile_workers"
  expect 2 $K compile k.cu --arch sm_90 -j 1025
  expect 2 $K demo --passes 1001
  expect 0 $K --evict-older-than 36500d; contains "0 entries (0 bytes) removed"
  expect 0 $K ls; contains "1 entries"
  ;;
config)
  expect 0 $K -p; contains "max_size"; contains "(default)"
  expect 0 $K -M 2Gi; expect 0 $K -F 300
  expect 0 $K -k max_size; [ "$OUT_TEXT" = "2Gi" ] || fail "-k max_size gave '$OUT_TEXT'"
  expect 0 $K -p; contains "$KCACHE_DIR/kcache.conf"
  KCACHE_MAX_SIZE=1G expect 0 $K -p; contains "environment (KCACHE_MAX_SIZE)"
  expect 0 $K -d "$WORK/other" -k max_size; [ "$OUT_TEXT" = "4Gi" ] || fail "-d ignored: '$OUT_TEXT'"
  BEFORE=$(cat "$KCACHE_DIR/kcache.conf")
  expect 2 $K -o max_files=-1
  [ "$(cat "$KCACHE_DIR/kcache.conf")" = "$BEFORE" ] || fail "a refused -o changed kcache.conf"
  # -c applies the configured budget.
  kernel_cu k.cu
  for s in 1 2 3; do expect 0 $K compile k.cu --arch sm_90 -D SCALE=$s.0f; done
  expect 0 $K -F 2
  expect 0 $K -c; contains "removed"
  expect 0 $K ls; contains "1 entries"
  ;;
stats)
  # Prebuilds are counted apart from lookups: the second finds its entry stored, which is no
  # lookup served and no time saved.
  kernel_cu k.cu
  expect 0 $K compile k.cu --arch sm_90 -D SCALE=1.0f
  expect 0 $K compile k.cu --arch sm_90 -D SCALE=1.0f
  expect 0 $K -s --json; flat_json
  contains '"lookups": 0,'; contains '"memory_hits": 0,'; contains '"compiles": 1,'
  contains '"saved_seconds": 0.0,'; contains '"prebuilds": 2, "prebuild_compiles": 1,'
  contains '"disk": {"hits": 0, "misses": 0, "rejected": 0, "writes": 1,'
  contains '"entries": 1,'; contains '"max_size_bytes": 4294967296'
  expect 0 $K -s; contains "Cache size:"; contains "Compile time spent:"
  # Every counter of the one list has its row (evictions and verify failures were once missing).
  contains "Evicted from loaded maps:"; contains "Verify failures:"
  grep -qE '^Prebuilds \(kcache compile\): +2 \(1 compiled\)$' <<<"$OUT_TEXT" ||
    fail "no 'Prebuilds: 2 (1 compiled)' line: $OUT_TEXT"
  grep -qE '^Compile time saved \(estimate\): +0\.000 s$' <<<"$OUT_TEXT" ||
    fail "no 'Compile time saved: 0.000 s' line: $OUT_TEXT"
  if grep -E '[0-9]{4}\.[0-9]%|[2-9][0-9]{2}\.[0-9]%|1[1-9][0-9]\.[0-9]%|10[1-9]\.[0-9]%' <<<"$OUT_TEXT"; then
    fail "a share above 100%: $OUT_TEXT"
  fi
  # A directory past its budget (the budget lowered since) says so, as a count.
  expect 0 $K compile k.cu --arch sm_90 -D SCALE=2.0f
  expect 0 $K -F 1
  expect 0 $K -s; contains "2 of 1 (over budget)"
  expect 0 $K -z
  expect 0 $K -s --json; contains '"compiles": 0,'; contains '"entries": 2,'
  ;;
stats_concurrent)
  # kcache -s while 4 programs write: every read succeeds and the totals add up at the end.
  kernel_cu k.cu
  for p in 1 2 3 4; do
    ( for s in 1 2 3; do $K compile k.cu --arch sm_90 -j 1 -D SCALE=$p.$s >/dev/null 2>&1; done ) &
  done
  for i in $(seq 1 30); do
    expect 0 $K -s --json; contains '"compiles": '
  done
  wait
  expect 0 $K -s --json; contains '"compiles": 12,'; contains '"entries": 12,'
  ;;
version)
  WANT="kcache $(sed -n 's/^#define KCACHE_VERSION "\(.*\)"$/\1/p' "$SRC/include/kcache/version.hpp")"
  [ "$WANT" != "kcache " ] || fail "no KCACHE_VERSION in version.hpp"
  for flag in -V --version; do
    expect 0 $K $flag; [ "$OUT_TEXT" = "$WANT" ] || fail "$flag said '$OUT_TEXT', not '$WANT'"
  done
  ;;
ls_kernels)
  # CUDA C++ without name expressions: the kernels come from the cubin's symbol table.
  cat > two.cu <<'CU'
extern "C" __global__ void first_kernel(float* x) { x[0] = 1; }
__device__ __noinline__ float helper(float a) { return a * 3; }
__global__ void second_kernel(float* x) { x[0] = helper(x[1]); }
CU
  expect 0 $K compile two.cu --arch sm_90
  expect 0 $K ls; contains "_Z13second_kernelPf, first_kernel"
  grep -q "helper" <<<"$OUT_TEXT" && fail "a device function listed as a kernel: $OUT_TEXT"
  expect 0 $K ls --json; flat_json; contains '"kernels": ["_Z13second_kernelPf", "first_kernel"]'
  FP=$(grep -o '"fingerprint": "[0-9a-f]*"' <<<"$OUT_TEXT" | grep -o '[0-9a-f]\{32\}')
  expect 0 $K inspect "$FP"; contains "kernels:     _Z13second_kernelPf, first_kernel (from the cubin)"
  ;;
ls_width)
  LONG=$(printf 'layer_%.0s' $(seq 1 20))kernel.cu
  kernel_cu "$LONG"
  expect 0 $K compile "$LONG" --arch sm_90 -D SCALE=1.0f
  expect 0 $K ls; contains "$LONG"   # not a terminal: whole
  expect 0 $K ls --width 70; contains "..."
  ! grep -qF "$LONG" <<<"$OUT_TEXT" || fail "--width 70 kept the whole key: $OUT_TEXT"
  awk 'length($0) > 70 { exit 1 }' <<<"$OUT_TEXT" || fail "a line past 70 columns: $OUT_TEXT"
  expect 0 $K ls --width 0; contains "$LONG"
  expect 2 $K ls --width 70 --full
  # On a terminal: $COLUMNS, unless --full.
  if command -v script >/dev/null; then
    OUT_TEXT=$(COLUMNS=70 script -qec "$K ls" /dev/null | tr -d '\r')
    contains "..."; awk 'length($0) > 70 { exit 1 }' <<<"$OUT_TEXT" || fail "past \$COLUMNS: $OUT_TEXT"
    OUT_TEXT=$(COLUMNS=70 script -qec "$K ls --full" /dev/null | tr -d '\r'); contains "$LONG"
  fi
  ;;
hostile_keys)
  # Keys and paths from entries never reach the terminal raw: escape sequences, C1 controls,
  # bytes that are not UTF-8, bidirectional overrides.
  export KCACHE_DIR=$WORK/$'cache\e]0;title\a'
  NAME=$'\e[31mred\xff\xc2\x9b\u202e.cu'
  kernel_cu "$NAME"
  expect 0 $K compile "$NAME" --arch sm_90 -D SCALE=1.0f; no_escape_byte
  contains '\x1b[31mred\xff\u009b\u202e.cu'
  expect 0 $K ls; no_escape_byte; contains '\x1b[31mred\xff\u009b\u202e.cu'
  contains 'cache\x1b]0;title\x07'
  FP=$($K ls --json | grep -o '"fingerprint": "[0-9a-f]*"' | grep -o '[0-9a-f]\{32\}')
  expect 0 $K inspect "$FP"; no_escape_byte; contains 'key: \x1b[31mred'
  printf 'junk' >> "$KCACHE_DIR/${FP:0:2}/${FP:2}.kc"
  expect 1 $K verify; no_escape_byte; contains 'cache\x1b]0;title\x07'
  expect 0 $K ls; no_escape_byte; contains "BAD: "
  expect 1 $K inspect "$FP"; no_escape_byte; contains "problem:"
  expect 0 $K -s; no_escape_byte
  ;;
json_bytes)
  # Every JSON document is valid, ASCII, versioned, and gives back bytes that are not UTF-8.
  export KCACHE_DIR=$WORK/$'cache\xff\e'
  NAME=$'key\xfe\e[0m.cu'
  kernel_cu "$NAME"
  expect 0 $K compile "$NAME" --arch sm_90 -D SCALE=1.0f
  FP=$($K ls --json | grep -o '"fingerprint": "[0-9a-f]*"' | grep -o '[0-9a-f]\{32\}')
  [ ${#FP} -eq 32 ] || fail "no fingerprint in ls --json"
  command -v python3 >/dev/null || { echo "PASS ($CASE; python3 missing: not parsed)"; exit 0; }
  check_json() {  # check_json PYTHON_EXPRESSION: over the document d, must be true
    LC_ALL=C grep -q $'[\x80-\xff]' <<<"$OUT_TEXT" && fail "not ASCII: $OUT_TEXT"
    python3 -c '
import base64, json, os, sys
d = json.loads(sys.stdin.buffer.read())
assert d["schema_version"] == 1, d
b = lambda s: base64.b64decode(s)
dir = os.fsencode(os.environ["KCACHE_DIR"]); name = os.fsencode(sys.argv[2])
assert eval(sys.argv[1]), d' "$1" "$NAME" <<<"$OUT_TEXT" || fail "JSON check '$1' failed: $OUT_TEXT"
  }
  expect 0 $K ls --json
  check_json 'b(d["directory_base64"]) == dir and b(d["entries"][0]["key_base64"]) == name and b(d["entries"][0]["path_base64"]).startswith(dir)'
  expect 0 $K inspect "$FP" --json; check_json 'b(d["key_base64"]) == name and d["problem"] is None'
  expect 0 $K -s --json; check_json 'b(d["directory_base64"]) == dir and d["disk"]["writes"] == 1'
  printf 'junk' >> "$KCACHE_DIR/${FP:0:2}/${FP:2}.kc"
  expect 1 $K verify --json; check_json 'd["bad"] == 1 and b(d["problems_base64"][0]).startswith(dir)'
  expect 0 $K demo --json; check_json 'd["launched"] >= 0 and "compiles" in d'
  ;;
progress)
  # On a terminal the bar names the file it is compiling (or the entry verify reads), escaped;
  # elsewhere compile writes a line per file and verify only its report.
  for s in 1 2; do kernel_cu "p$s.cu"; done
  N=$'bad\e[2Jname.cu'; kernel_cu "$N"
  command -v script >/dev/null || { echo "PASS ($CASE; no script(1): terminal not tried)"; exit 0; }
  OUT_TEXT=$(COLUMNS=80 script -qec "$K compile p1.cu p2.cu '$N' --arch sm_90 -j 1 -D SCALE=1.0f" /dev/null)
  contains "0/3 compiling p1.cu"; contains "1/3 compiling p2.cu"; contains '2/3 compiling bad\x1b[2Jname.cu'
  contains "3/3 already in the cache bad"  # the same source as p1.cu
  grep -qF $'\e[2J' <<<"$OUT_TEXT" && fail "the file name's escape reached the terminal"
  # A compiler's message goes on lines of its own, not after the bar.
  printf 'extern "C" __global__ void k() { undeclared_thing(); }\n' > bad.cu
  OUT_TEXT=$(COLUMNS=80 script -qec "$K compile bad.cu p1.cu --arch sm_90 -j 1 -D SCALE=1.0f" /dev/null)
  contains "undeclared_thing"
  ! tr '\r' '\n' <<<"$OUT_TEXT" | grep -q '\] .*kcache:' || fail "a message after the bar: $OUT_TEXT"
  tr '\r' '\n' <<<"$OUT_TEXT" | grep -q '^'$'\e''\[Kkcache: ' || fail "no message on its own line: $OUT_TEXT"
  OUT_TEXT=$(COLUMNS=300 script -qec "$K verify" /dev/null)
  contains "0/1 checking $KCACHE_DIR/"; contains "1/1 checked $KCACHE_DIR/"
  contains "1 entries checked, 0 bad"
  expect 0 $K compile p1.cu p2.cu --arch sm_90 -j 1 -D SCALE=2.0f
  contains "1/2 p1.cu: compiled"; contains "2/2 p2.cu: already in the cache"
  expect 0 $K verify; [ "$OUT_TEXT" = "2 entries checked, 0 bad, 0 removed" ] ||
    fail "verify wrote more than its report where stderr is no terminal: $OUT_TEXT"
  ;;
remote)
  # The remote tier from the command: a redis-server on a unix socket of this test's own (no TCP
  # port), ping, compile uploading, push, pull, the password never printed, keygen.
  command -v redis-server >/dev/null || { echo "SKIP ($CASE): no redis-server"; exit 77; }
  SOCK="$WORK/redis.sock"
  redis-server --port 0 --unixsocket "$SOCK" --save '' --appendonly no --requirepass 'cli-Pa55' \
    --dir "$WORK" --daemonize no >/dev/null 2>&1 &
  REDIS=$!
  trap 'kill -9 $REDIS 2>/dev/null; rm -rf "$WORK"' EXIT
  for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.05; done
  printf 'cli-Pa55\n' > pw; chmod 600 pw
  export KCACHE_REMOTE="redis+unix:$SOCK|password-file=$WORK/pw"
  expect 0 $K remote ping; contains "reachable"; contains "writes allowed"
  expect 0 $K remote ping --json; contains '"reachable": true'
  kernel_cu k1.cu; kernel_cu k2.cu
  expect 0 $K compile k1.cu --arch sm_90 -D SCALE=1.0f; contains "remote: 1 uploaded"
  # Another machine's empty disk: pull by fingerprint, then by arch.
  FP=$($K ls --json | grep -o '"fingerprint": "[0-9a-f]*"' | head -1 | grep -o '[0-9a-f]\{32\}')
  [ -n "$FP" ] || fail "no fingerprint listed"
  expect 0 env KCACHE_DIR="$WORK/other" $K pull "$FP"; contains "1 fetched"
  expect 0 env KCACHE_DIR="$WORK/third" $K pull --arch sm_90; contains "1 fetched"
  expect 0 env KCACHE_DIR="$WORK/third" $K pull --arch sm_80; contains "0 fetched"
  expect 2 $K pull nothex
  # push: what the remote lacks. A second directory's entry, compiled without the remote.
  expect 0 env KCACHE_DIR="$WORK/offline" KCACHE_REMOTE= $K compile k2.cu --arch sm_90 -D SCALE=3.0f
  expect 0 env KCACHE_DIR="$WORK/offline" $K push; contains "1 uploaded"
  expect 0 env KCACHE_DIR="$WORK/offline" $K push; contains "0 uploaded"; contains "1 there already"
  # A password in the URL works and is never printed: -p, -k, ping, errors, the statistics.
  export KCACHE_REMOTE="redis+unix:$SOCK"
  URL_PW="redis://:cli-Pa55@localhost:1|connect-timeout=50ms"
  expect 0 env KCACHE_REMOTE="$URL_PW" $K -p; contains "redis://:***@localhost:1"
  grep -qF "cli-Pa55" <<<"$OUT_TEXT" && fail "-p printed the password"
  expect 0 env KCACHE_REMOTE="$URL_PW" $K -k remote
  grep -qF "cli-Pa55" <<<"$OUT_TEXT" && fail "-k printed the password"
  expect 1 env KCACHE_REMOTE="$URL_PW" $K remote ping
  grep -qF "cli-Pa55" <<<"$OUT_TEXT" && fail "ping printed the password: $OUT_TEXT"
  expect 0 $K -s; contains "Remote tier hits"
  expect 0 $K -s --json; flat_json; contains '"remote": {"hits":'
  grep -rqF "cli-Pa55" "$KCACHE_DIR" && fail "a file in the cache directory holds the password"
  # A bad setting is an error naming what is wrong.
  expect 2 env KCACHE_REMOTE="rediss://x" $K remote ping; contains "TLS (rediss://) is not supported"
  expect 2 env KCACHE_REMOTE= $K remote ping; contains "no remote tier"
  # keygen: a key pair the setting accepts, never overwritten.
  expect 0 $K keygen build.key build.pub; contains "verify key"
  expect 1 $K keygen build.key other.pub
  expect 0 $K keygen --hmac shared.secret
  expect 0 env KCACHE_REMOTE="redis+unix:$SOCK|password-file=$WORK/pw|sign-key=$WORK/build.key" \
    $K remote ping
  ;;
*)
  fail "no such case"
  ;;
esac
echo "PASS ($CASE)"
