# SPDX-License-Identifier: Apache-2.0
# Helpers of the hostile-directory suite (tests/hostile/hostile_test.sh sources this).
# Permissions only matter for a user who is not root, so every kcache call runs as `nobody`
# through runuser, with a clean environment, bounded by `timeout`: a hang is a failure, never a
# stuck run. Root plays "the other user" (the owner of a planted directory, say).

SKIP=77  # ctest's SKIP_RETURN_CODE for this suite

skip() { echo "SKIP ($CASE): $*"; exit "$SKIP"; }

# The failures of a case are collected, so that one run shows every instance that is wrong.
FAILURES=0
bad() { echo "FAIL ($CASE): $*"; FAILURES=$((FAILURES + 1)); }
note() { echo "  ($CASE) $*"; }
finish() {
  if [ "$FAILURES" -ne 0 ]; then echo "FAILED ($CASE): $FAILURES check(s)"; exit 1; fi
  echo "PASS ($CASE)"; exit 0
}

[ "$(id -u)" -eq 0 ] || skip "needs root, to run kcache as nobody where permissions matter"
command -v runuser >/dev/null 2>&1 || skip "needs runuser (util-linux)"
NOBODY=nobody
id "$NOBODY" >/dev/null 2>&1 || skip "no user '$NOBODY'"
NOBODY_UID=$(id -u "$NOBODY")
NOBODY_GID=$(id -g "$NOBODY")

LIMIT=${KCACHE_HOSTILE_TIMEOUT:-20}  # seconds per kcache call
# Address space per kcache call: a kcache that reads a huge file whole fails here (as it would
# on a smaller machine) instead of taking the memory of a machine that others share.
VMEM_KB=${KCACHE_HOSTILE_VMEM_KB:-2097152}
W=$(mktemp -d /tmp/kcache-hostile.XXXXXX)
chmod 755 "$W"
HOLDERS=()  # pids of lock holders this case started (killed by pid at exit)
cleanup_work() {
  local pid
  for pid in "${HOLDERS[@]}"; do { kill -KILL "$pid"; wait "$pid"; } 2>/dev/null; done
  for m in "${MOUNTS[@]}"; do umount "$m" 2>/dev/null; done
  chmod -R u+rwX "$W" 2>/dev/null
  rm -rf "$W"
}
MOUNTS=()
trap cleanup_work EXIT

# The binary, where nobody can run it (a build folder below a private one would not do).
if runuser -u "$NOBODY" -- test -x "$KBIN"; then
  K=$KBIN
else
  mkdir -p "$W/bin"; cp "$KBIN" "$W/bin/kcache"; chmod 755 "$W/bin" "$W/bin/kcache"
  K=$W/bin/kcache
fi
# The library probe (tests/hostile/prebuild_probe.cpp), where nobody can run it, if given.
PROBE=
if [ -n "${PROBE_BIN:-}" ]; then
  if runuser -u "$NOBODY" -- test -x "$PROBE_BIN"; then
    PROBE=$PROBE_BIN
  else
    mkdir -p "$W/bin"; cp "$PROBE_BIN" "$W/bin/kcache_hostile_probe"
    chmod 755 "$W/bin" "$W/bin/kcache_hostile_probe"
    PROBE=$W/bin/kcache_hostile_probe
  fi
fi
TIME_BIN=/usr/bin/time
[ -x "$TIME_BIN" ] || TIME_BIN=

# Nobody's home, the default cache directory below it, and a scratch folder nobody writes.
NH=$W/home
mkdir -p "$NH" "$W/o" "$W/src"
chown "$NOBODY_UID:$NOBODY_GID" "$NH" "$W/o"
chmod 700 "$NH"
chmod 755 "$W/src"
D=$NH/cache  # the cache directory of the current instance (KCACHE_DIR)
EXTRA_ENV=()  # further VAR=VALUE for the next kn calls

as_nobody() { runuser -u "$NOBODY" -- "$@"; }

# kn ARGS...: runs `kcache ARGS` (or `$KN_BIN ARGS`) as nobody with HOME=$NH KCACHE_DIR=$D
# "${EXTRA_ENV[@]}".
# Sets RC (124 after a timeout, 128+N after signal N), OUT (stdout), ERR (stderr), ALL (both),
# RSS_KB (the largest resident size, when /usr/bin/time is there) and SECS.
kn() {
  local envs=(PATH=/usr/local/bin:/usr/bin:/bin HOME="$NH")
  [ -n "$D" ] && envs+=(KCACHE_DIR="$D")
  [ -n "${LD_LIBRARY_PATH:-}" ] && envs+=(LD_LIBRARY_PATH="$LD_LIBRARY_PATH")
  [ -n "${CUDA_HOME:-}" ] && envs+=(CUDA_HOME="$CUDA_HOME")
  envs+=("${EXTRA_ENV[@]}")
  rm -f "$W/o/rss"
  local start=$SECONDS
  if [ -n "$TIME_BIN" ]; then
    as_nobody timeout -k 5 "$LIMIT" "$TIME_BIN" -f %M -o "$W/o/rss" \
      sh -c 'ulimit -v "$0" && exec "$@"' "$VMEM_KB" env -i "${envs[@]}" "${KN_BIN:-$K}" "$@" \
      >"$W/stdout" 2>"$W/stderr" </dev/null
  else
    as_nobody timeout -k 5 "$LIMIT" \
      sh -c 'ulimit -v "$0" && exec "$@"' "$VMEM_KB" env -i "${envs[@]}" "${KN_BIN:-$K}" "$@" \
      >"$W/stdout" 2>"$W/stderr" </dev/null
  fi
  RC=$?
  SECS=$((SECONDS - start))
  OUT=$(cat "$W/stdout"); ERR=$(cat "$W/stderr"); ALL="$OUT"$'\n'"$ERR"
  RSS_KB=
  if [ -s "$W/o/rss" ]; then
    RSS_KB=$(tail -1 "$W/o/rss")
    local sig
    sig=$(sed -n 's/^Command terminated by signal \([0-9]*\).*/\1/p' "$W/o/rss")
    [ -n "$sig" ] && RC=$((128 + sig))
  fi
  return 0
}
# What a run looked like, on one line, for a failure message.
said() { printf "rc=%s %ss: %s" "$RC" "$SECS" "$(printf '%s' "$ALL" | tr '\n' '|' | cut -c1-400)"; }

# Checks of the last kn.
finished() {  # finished WHAT: within the time limit, neither aborted nor crashed
  case $RC in
    124|137|143) bad "$1: did not finish within ${LIMIT}s ($(said))"; return 1 ;;
    134|139|136|135) bad "$1: crashed ($(said))"; return 1 ;;
  esac
  return 0
}
want_rc() { [ "$RC" -eq "$2" ] || bad "$1: exit $RC, expected $2 ($(said))"; [ "$RC" -eq "$2" ]; }
want_in() { grep -qiE -- "$3" <<<"$2" || bad "$1: lacks /$3/ ($(said))"; }
want_not_in() { ! grep -qiE -- "$3" <<<"$2" || bad "$1: has /$3/ ($(said))"; }
small_rss() {  # small_rss WHAT: the largest resident size stayed below 200 MB
  [ -z "$RSS_KB" ] && return 0
  [ "$RSS_KB" -lt 204800 ] || bad "$1: resident size ${RSS_KB} KiB (read whole?) ($(said))"
}

# kernel_cu FILE [SCALE]: a small CUDA C++ file (nobody can read it).
kernel_cu() {
  cat >"$1" <<CU
extern "C" __global__ void scale(float* out, const float* in, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] * ${2:-2.0f};
}
CU
  chmod 644 "$1"
}

entries() { find "$1" -name '*.kc' -type f 2>/dev/null | wc -l; }
entry_bytes() { find "$1" -name '*.kc' -type f -printf '%s\n' 2>/dev/null | awk '{s+=$1} END {print s+0}'; }
# snapshot DIR: every path below DIR with its type, size, mtime and content checksum.
snapshot() {
  (cd "$1" && find . -printf '%y %p %s %T@ %l\n' | sort
   find . -type f -exec md5sum {} + 2>/dev/null | sort -k2)
}
# The fingerprint of the only entry in $D (or the first one).
first_fp() {
  local f
  f=$(find "$D" -name '*.kc' -type f | head -1)
  [ -n "$f" ] || return 1
  printf '%s%s' "$(basename "$(dirname "$f")")" "$(basename "$f" .kc)"
}
entry_path() { printf '%s/%s/%s.kc' "$D" "${1:0:2}" "${1:2}"; }
# A directory owned by nobody, mode 0700 (a fresh cache directory made ahead).
nobody_dir() { mkdir -p "$1"; chown "$NOBODY_UID:$NOBODY_GID" "$1"; chmod "${2:-700}" "$1"; }
