#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The hostile-directory suite of issue 15: each case turns the cache directory against its user
# (or is as careless as a user may be) and checks what kcache does, end to end through the CLI,
# run as `nobody` so that permissions matter (and, for library_conf_program, through a small
# program that uses the library). Usage: hostile_test.sh KCACHE_BINARY CASE [PROBE_BINARY]
# Exits 0 (pass), 1 (fail: every wrong instance is listed) or 77 (skipped: not root, no runuser).
# A case disabled in CMakeLists.txt runs by hand, as root:
#   bash tests/hostile/hostile_test.sh build/kcache CASE build/kcache_hostile_probe
# KCACHE_HOSTILE_TIMEOUT (seconds per kcache call, default 20; 10 for regular_files_*) and
# KCACHE_HOSTILE_VMEM_KB (address space per call, default 2 GiB) tune it.
set -uo pipefail
KBIN=$(readlink -f "$1")
[ -x "$KBIN" ] || { echo "FAIL: no kcache binary at $1"; exit 1; }
CASE=$2
PROBE_BIN=
[ -n "${3:-}" ] && PROBE_BIN=$(readlink -f "$3")
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"
cd "$W/src" || exit 1

# The program a planted kcache.conf names as the compile worker: it only leaves a mark.
make_evil() {
  mkdir -p "$W/mark"; chmod 777 "$W/mark"
  cat >"$W/evil.sh" <<EOF
#!/bin/sh
touch "$W/mark/evil-ran"
exit 1
EOF
  chmod 755 "$W/evil.sh"
}
evil_ran() { [ -e "$W/mark/evil-ran" ]; }

case $CASE in

# 1. A refused directory is refused before anything in it is read: its kcache.conf is never
#    applied (no program it names runs, no budget or relaxation it sets holds).
refused_dir_conf)
  make_evil
  kernel_cu k.cu
  conf_lines() {  # conf_lines DIR [allow]: a hostile kcache.conf
    {
      [ "${2:-}" = allow ] && echo "allow_shared_dir = 1"
      echo "compile_worker = $W/evil.sh"
      echo "compile_workers = 2"
      echo "max_size = 1k"
    } >"$1/kcache.conf"
  }
  # name  owner  mode  with-allow_shared_dir
  for spec in "root-owned:root:755:" "root-owned-world-writable:root:777:allow" \
              "group-writable:nobody:770:allow" "world-writable:nobody:777:allow" \
              "group-writable-plain:nobody:770:"; do
    IFS=: read -r name owner mode allow <<<"$spec"
    D=$W/$name
    mkdir -p "$D"; conf_lines "$D" "$allow"
    [ "$owner" = nobody ] && chown -R "$NOBODY_UID:$NOBODY_GID" "$D"
    chmod "$mode" "$D"
    before=$(snapshot "$D")
    rm -f "$W/mark/evil-ran"
    kn compile k.cu --arch sm_90 -j 2
    if finished "$name: compile"; then
      want_rc "$name: compile in a refused directory" 1
      want_in "$name: compile says the directory is refused" "$ERR" "refus"
    fi
    EXTRA_ENV=(KCACHE_COMPILE_WORKERS=2)
    kn compile k.cu --arch sm_90 -j 2
    finished "$name: compile (KCACHE_COMPILE_WORKERS=2)"
    kn demo --json
    finished "$name: demo"
    EXTRA_ENV=()
    evil_ran && bad "$name: the compile_worker named by the refused directory's kcache.conf ran"
    [ "$(snapshot "$D")" = "$before" ] || bad "$name: something was written in the refused directory: $(diff <(echo "$before") <(snapshot "$D") | head -5 | tr '\n' '|')"
    kn -p
    if finished "$name: -p"; then
      want_in "$name: -p reports the refusal" "$ERR" "refus"
      grep -qE '^max_size +=  *1k' <<<"$OUT" && bad "$name: -p shows max_size = 1k from the refused directory's kcache.conf"
      grep -qE '^allow_shared_dir +=  *1' <<<"$OUT" && bad "$name: -p shows allow_shared_dir = 1 from the refused directory's kcache.conf"
      grep -qE '^compile_worker +=.*evil' <<<"$OUT" && bad "$name: -p shows the refused directory's compile_worker"
    fi
    kn -s
    finished "$name: -s" && want_in "$name: -s reports the refusal" "$ERR" "refus"
    [ "$(snapshot "$D")" = "$before" ] || bad "$name: -p/-s wrote in the refused directory"
  done
  finish
  ;;

# 1. The same through the library (KernelCache::global(), which reads kcache.conf): a program
#    named by kcache.conf never runs, whether the directory is refused or accepted.
library_conf_program)
  [ -n "$PROBE" ] || { echo "FAIL ($CASE): give the probe binary as the third argument"; exit 1; }
  make_evil
  kernel_cu k.cu
  # name  owner  mode  with-allow_shared_dir
  for spec in "root-owned:root:755:" "root-owned-world-writable:root:777:allow" \
              "group-writable:nobody:770:allow" "accepted:nobody:700:"; do
    IFS=: read -r name owner mode allow <<<"$spec"
    D=$W/$name
    mkdir -p "$D"
    {
      [ "$allow" = allow ] && echo "allow_shared_dir = 1"
      echo "compile_worker = $W/evil.sh"
      echo "compile_workers = 2"
    } >"$D/kcache.conf"
    [ "$owner" = nobody ] && chown -R "$NOBODY_UID:$NOBODY_GID" "$D"
    chmod "$mode" "$D"
    before=$(snapshot "$D")
    rm -f "$W/mark/evil-ran"
    KN_BIN=$PROBE kn k.cu 90
    finished "$name: a library prebuild of CUDA C++"
    evil_ran && bad "$name: the compile_worker named by kcache.conf ran (as nobody) in a library prebuild ($(said))"
    if [ "$name" != accepted ] && [ "$(snapshot "$D")" != "$before" ]; then
      bad "$name: a library prebuild wrote in the refused directory: $(diff <(echo "$before") <(snapshot "$D") | grep '^[<>] [^d]' | head -3 | tr '\n' '|')"
    fi
  done
  finish
  ;;

# 1. In an accepted directory, kcache.conf may not relax a check or name a program: those lines
#    are a clear error (file and line) and are not applied; the other lines still are.
conf_cannot_relax)
  make_evil
  kernel_cu k.cu
  D=$NH/cache
  nobody_dir "$D"
  printf '%s\n' "max_size = 8Gi" "allow_shared_dir = 1" "compile_worker = $W/evil.sh" \
    "compile_workers = 2" >"$D/kcache.conf"
  chown "$NOBODY_UID:$NOBODY_GID" "$D/kcache.conf"; chmod 600 "$D/kcache.conf"
  kn -p
  if finished "-p"; then
    grep -qE '^allow_shared_dir +=  *1' <<<"$OUT" && bad "-p shows allow_shared_dir = 1 from kcache.conf ($(said))"
    grep -qE '^compile_worker +=.*evil' <<<"$OUT" && bad "-p shows kcache.conf's compile_worker ($(said))"
    grep -iE 'kcache\.conf' <<<"$ALL" | grep -i allow_shared_dir | grep -qE '(:|line )2([^0-9]|$)' ||
      bad "-p: no error naming kcache.conf, line 2 and allow_shared_dir ($(said))"
    grep -iE 'kcache\.conf' <<<"$ALL" | grep -i 'compile_worker' | grep -qE '(:|line )3([^0-9]|$)' ||
      bad "-p: no error naming kcache.conf, line 3 and compile_worker ($(said))"
    grep -qE '^max_size +=  *8Gi' <<<"$OUT" || bad "-p: the good line max_size = 8Gi was dropped ($(said))"
  fi
  EXTRA_ENV=(KCACHE_COMPILE_WORKERS=2)
  kn compile k.cu --arch sm_90 -j 2
  finished "compile -j 2 (KCACHE_COMPILE_WORKERS=2)"
  EXTRA_ENV=()
  kn compile k.cu --arch sm_90 -j 2 -D SCALE=3.0f
  finished "compile -j 2"
  evil_ran && bad "the compile_worker named by kcache.conf ran"
  # Group-writable now: kcache.conf's allow_shared_dir must not make kcache accept it.
  n=$(entries "$D")
  chmod 770 "$D"
  kn compile k.cu --arch sm_90 -j 1 -D SCALE=4.0f
  if finished "compile in the group-writable directory"; then
    want_rc "compile in a group-writable directory (kcache.conf says allow_shared_dir = 1)" 1
    want_in "compile in a group-writable directory" "$ERR" "refus"
  fi
  [ "$(entries "$D")" -eq "$n" ] || bad "an entry was stored in a group-writable directory that only kcache.conf allowed"
  # What the environment allows still works (the setting is not dropped, only its source).
  EXTRA_ENV=(KCACHE_ALLOW_SHARED_DIR=1)
  kn compile k.cu --arch sm_90 -j 1 -D SCALE=5.0f
  finished "compile with KCACHE_ALLOW_SHARED_DIR=1" && want_rc "compile in a group-writable directory with KCACHE_ALLOW_SHARED_DIR=1" 0
  [ "$(entries "$D")" -gt "$n" ] || bad "KCACHE_ALLOW_SHARED_DIR=1: compile stored nothing in the group-writable directory ($(said))"
  finish
  ;;

# 2. Nothing follows a link out of the directory: a link planted at an entry folder, at stats/,
#    at keys/ or at a key-index folder leaves every file outside as it was (no file created,
#    changed or deleted), and kcache keeps working.
links_stay_inside)
  kernel_cu k.cu
  for what in entry_folder stats keys key_folder; do
    D=$NH/cache-$what
    EXTRA_ENV=()
    kn compile k.cu --arch sm_90 -j 1
    want_rc "$what: first compile" 0 || continue
    FP=$(first_fp)
    KEYREC=$(cd "$D/keys" && find . -type f | head -1 | sed 's|^\./||')  # kk/rest of k.cu
    OUTSIDE=$W/outside-$what
    nobody_dir "$OUTSIDE"
    case $what in
      entry_folder) link=$D/${FP:0:2}
        for f in "${FP:2}.kc" "${FP:2}.kc.lock" "${FP:2}.kc.tmp.host.1.2" \
                 "ffffffffffffffffffffffffffffff.kc" old.txt; do
          echo "precious $f" >"$OUTSIDE/$f"; done ;;
      stats) link=$D/stats
        for f in 0 0.lock 1 old.txt; do echo "precious $f" >"$OUTSIDE/$f"; done ;;
      keys) link=$D/keys
        mkdir -p "$OUTSIDE/${KEYREC%%/*}"
        echo "precious record" >"$OUTSIDE/$KEYREC"; echo precious >"$OUTSIDE/old.txt" ;;
      key_folder) link=$D/keys/${KEYREC%%/*}
        echo "precious record" >"$OUTSIDE/${KEYREC#*/}"; echo precious >"$OUTSIDE/old.txt" ;;
    esac
    chown -R "$NOBODY_UID:$NOBODY_GID" "$OUTSIDE"
    find "$OUTSIDE" -mindepth 1 -exec touch -h -d '60 days ago' {} +
    rm -rf "$link"
    as_nobody ln -s "$OUTSIDE" "$link"
    previous=$(snapshot "$OUTSIDE")
    step() {  # step ARGS...: one kcache command, then a look at the files outside
      kn "$@"
      finished "$what: kcache $*"
      local now
      now=$(snapshot "$OUTSIDE")
      if [ "$now" != "$previous" ]; then
        bad "$what: 'kcache $*' changed files outside the directory through the link: $(diff <(echo "$previous") <(echo "$now") | grep '^[<>] [^d]' | head -4 | tr '\n' '|')"
      fi
      previous=$now
    }
    step compile k.cu --arch sm_90 -j 1
    step compile k.cu --arch sm_90 -j 1 -D SCALE=3.0f
    step -z
    step -s
    step -s --json
    step ls
    step -c -F 1
    step --evict-older-than 1s
    step verify --repair
    step -C
    step compile k.cu --arch sm_90 -j 1 -D SCALE=4.0f
    if [ "$RC" -ne 0 ] && { [ "$RC" -ne 1 ] || [ -z "$ERR" ]; }; then
      bad "$what: compile after the link was planted neither works nor fails clearly ($(said))"
    fi
  done
  finish
  ;;

# 3. Only regular files of a plausible size are read: a FIFO, a link to /dev/zero or a huge
#    sparse file at an entry's path, as kcache.conf or as the stats shards: every command
#    finishes (quickly, in little memory, without an abort); a bad entry is a miss, a bad
#    kcache.conf a clear error.
regular_files_entry|regular_files_conf|regular_files_stats)
  LIMIT=${KCACHE_HOSTILE_TIMEOUT:-10}
  target=${CASE#regular_files_}
  kernel_cu k.cu
  plant() {  # plant KIND PATH: a FIFO, a link to /dev/zero or an 8 GiB sparse file at PATH
    rm -f "$2"
    case $1 in
      fifo) as_nobody mkfifo "$2" ;;
      devzero) as_nobody ln -s /dev/zero "$2" ;;
      huge) as_nobody truncate -s 8G "$2" ;;
    esac
  }
  for kind in fifo devzero huge; do
    D=$NH/cache-$kind
    kn compile k.cu --arch sm_90 -j 1
    want_rc "$kind: first compile" 0 || continue
    FP=$(first_fp)
    case $target in
      entry) plant "$kind" "$(entry_path "$FP")" ;;
      conf) plant "$kind" "$D/kcache.conf" ;;
      stats) for n in 0 1 2 3 4 5 6 7 8 9 a b c d e f; do plant "$kind" "$D/stats/$n"; done ;;
    esac
    # -z and compile last: they may replace what was planted.
    for cmd in "verify" "ls" "ls --json" "inspect $FP" "-s" "-s --json" "-p" "demo --json" \
               "compile k.cu --arch sm_90 -j 1" "-z"; do
      # shellcheck disable=SC2086
      kn $cmd
      finished "$target $kind: kcache $cmd" || continue
      small_rss "$target $kind: kcache $cmd"
      want_not_in "$target $kind: kcache $cmd (an allocation failure is a miss or a clear error)" "$ALL" "bad_alloc|terminate called"
      case "$target:$cmd" in
        entry:verify)
          want_rc "$target $kind: verify with a bad entry" 1 && want_in "$target $kind: verify counts it" "$OUT" "1 bad" ;;
        entry:compile*)
          want_rc "$target $kind: compile (the entry is a miss)" 0 && want_in "$target $kind: compile recompiles" "$OUT" "1 compiled" ;;
        conf:-p)
          want_in "$target $kind: -p names the bad kcache.conf" "$ERR" "kcache\.conf" ;;
      esac
    done
  done
  finish
  ;;

# 4. A header the compiler read from disk is fingerprinted (or such an include refused): after
#    the header changes, the next compile makes a new artifact, never "already in the cache".
headers_fingerprinted)
  mkdir -p "$W/inc"; chmod 755 "$W/inc"
  header_case() {  # header_case NAME KERNEL_FILE HEADER_TO_CHANGE
    local name=$1 file=$2 header=$3
    D=$NH/cache-$name
    # shellcheck disable=SC2086
    kn compile $file --arch sm_90 -j 1
    finished "$name: first compile" || return
    note "$name: first compile: $(said)"
    if [ "$RC" -ne 0 ]; then  # refused: fine if it says so and stores nothing
      want_rc "$name: a refused include" 1
      [ -n "$ERR" ] || bad "$name: the include was refused without a word"
      [ "$(entries "$D")" -eq 0 ] || bad "$name: refused, yet an entry was stored"
      return
    fi
    sed -i 's/2\.0f/3.0f/' "$header"
    # shellcheck disable=SC2086
    kn compile $file --arch sm_90 -j 1
    if finished "$name: compile after the header changed"; then
      want_rc "$name: compile after the header changed" 0
      want_in "$name: a changed header gives a new artifact" "$OUT" "1 compiled"
      want_not_in "$name: a changed header gives a new artifact" "$OUT" "1 already in the cache"
    fi
  }
  # An absolute include.
  echo '#define HFACTOR 2.0f' >"$W/inc/h.h"
  printf '#include "%s"\n' "$W/inc/h.h" >abs.cu; cat >>abs.cu <<'CU'
extern "C" __global__ void scale(float* out, const float* in, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] * HFACTOR;
}
CU
  # An absolute include that includes another by its absolute path.
  printf '#include "%s"\n' "$W/inc/inner.h" >"$W/inc/outer.h"
  echo '#define IFACTOR 2.0f' >"$W/inc/inner.h"
  printf '#include "%s"\n' "$W/inc/outer.h" >nested.cu
  sed 's/HFACTOR/IFACTOR/' <(tail -n +2 abs.cu) >>nested.cu
  # A header named by an option (NVRTC's --pre-include).
  echo '#define PFACTOR 2.0f' >"$W/inc/pre.h"
  sed 's/HFACTOR/PFACTOR/' <(tail -n +2 abs.cu) >pre.cu
  chmod 644 "$W"/inc/*.h ./*.cu
  header_case absolute abs.cu "$W/inc/h.h"
  header_case nested nested.cu "$W/inc/inner.h"
  header_case pre_include "pre.cu --option=--pre-include=$W/inc/pre.h" "$W/inc/pre.h"
  finish
  ;;

# 5. Ages, sizes and counts from the user are range-checked: a huge one is a usage error (exit
#    2), never a wrapped number that removes fresh entries.
huge_numbers)
  kernel_cu k.cu
  refill() {  # three fresh entries, again after an instance removed them
    local s
    for s in 1 2 3; do kn compile k.cu --arch sm_90 -j 1 -D SCALE=$s.0f; done
    [ "$(entries "$D")" -eq 3 ] || bad "setup: 3 entries expected, $(entries "$D") found"
  }
  refill
  for age in 200000d 99999999999999d 9223372036854775808s 9223372036854775807s \
             18446744073709551616s 106751992d 2562047789h 153722867281m; do
    kn --evict-older-than "$age"
    finished "--evict-older-than $age" || continue
    want_rc "--evict-older-than $age" 2
    [ "$(entries "$D")" -eq 3 ] || { bad "--evict-older-than $age removed fresh entries ($(said))"; refill; }
  done
  for size in 18446744073709551616 99999999999T 20000000000Gi 18446744073709551616k; do
    kn -c -M "$size"
    finished "-c -M $size" || continue
    want_rc "-c -M $size" 2
    [ "$(entries "$D")" -eq 3 ] || { bad "-c -M $size removed fresh entries ($(said))"; refill; }
  done
  for setting in "max_size=99999999999Ti" "max_size=18446744073709551616" \
                 "max_files=18446744073709551616" "max_entries=99999999999999999999"; do
    kn -o "$setting"
    finished "-o $setting" && want_rc "-o $setting" 2
  done
  kn -c
  if finished "-c after the refused settings"; then
    [ "$(entries "$D")" -eq 3 ] || bad "-c removed fresh entries after the refused settings ($(said))"
  fi
  finish
  ;;

# 6. `kcache compile` does not say it stored what it did not (exit 1, naming the file and why),
#    and honours the directory's settings as the library does (budgets, allow_shared_dir).
compile_tells_truth)
  kernel_cu k.cu
  not_stored() {  # not_stored NAME WHY_REGEX: the last compile failed loudly, naming k.cu
    finished "$1: compile" || return
    want_rc "$1: compile that stored nothing" 1
    want_in "$1: compile names the file not stored" "$ERR" "k\.cu"
    want_in "$1: compile says why" "$ERR" "$2"
  }
  # A full disk: a 64 KiB tmpfs that nobody owns, filled up.
  FULL=$W/full
  mkdir -p "$FULL"
  if mount -t tmpfs -o "size=64k,mode=0700,uid=$NOBODY_UID,gid=$NOBODY_GID" tmpfs "$FULL" 2>/dev/null; then
    MOUNTS+=("$FULL")
    D=$FULL/cache
    nobody_dir "$D"
    as_nobody dd if=/dev/zero of="$FULL/filler" bs=4k 2>/dev/null
    kn compile k.cu --arch sm_90 -j 1
    not_stored "full disk" "space|full"
  else
    note "full disk: cannot mount a tmpfs here; instance skipped"
  fi
  # The cache directory is not writable (its owner made it read-only).
  D=$NH/cache-readonly
  nobody_dir "$D" 500
  kn compile k.cu --arch sm_90 -j 1
  not_stored "read-only directory" "denied|permission|read-only|writ"
  # The entry's folder is not writable.
  D=$NH/cache-folder
  kn compile k.cu --arch sm_90 -j 1 -D SCALE=7.0f
  FP=$(first_fp) && rm -f "$(entry_path "$FP")" && chmod 500 "$D/${FP:0:2}"
  kn compile k.cu --arch sm_90 -j 1 -D SCALE=7.0f
  not_stored "entry folder not writable" "denied|permission|read-only|writ"
  # The directory is refused: another user's.
  D=$W/root-owned
  mkdir -p "$D"; chmod 755 "$D"
  kn compile k.cu --arch sm_90 -j 1
  not_stored "another user's directory" "refus"
  # The directory is a link to another user's directory.
  D=$NH/link-to-root
  as_nobody ln -s "$W/root-owned" "$D"
  kn compile k.cu --arch sm_90 -j 1
  not_stored "a link to another user's directory" "refus|link|another user|owner"
  # Budgets in kcache.conf (and in the environment) hold after compiling past them.
  for spec in "conf-files:max_files = 2" "conf-size:max_size = 10k" "env-files:KCACHE_MAX_FILES=2"; do
    name=${spec%%:*}; setting=${spec#*:}
    D=$NH/cache-$name
    nobody_dir "$D"
    EXTRA_ENV=()
    case $name in
      conf-*) echo "$setting" >"$D/kcache.conf"; chown "$NOBODY_UID:$NOBODY_GID" "$D/kcache.conf" ;;
      env-*) EXTRA_ENV=("$setting") ;;
    esac
    for s in 1 2 3 4; do
      kn compile k.cu --arch sm_90 -j 1 -D SCALE=$s.5f
      finished "$name: compile $s" && want_rc "$name: compile $s" 0
    done
    note "$name: $(entries "$D") entries, $(entry_bytes "$D") bytes"
    case $name in
      *files*) [ "$(entries "$D")" -le 2 ] || bad "$name: $(entries "$D") entries after compiling 4 with '$setting'" ;;
      *size*) [ "$(entry_bytes "$D")" -le 10240 ] || bad "$name: $(entry_bytes "$D") bytes of entries after compiling 4 with '$setting'" ;;
    esac
  done
  EXTRA_ENV=()
  # allow_shared_dir from the environment: compile stores in the group-writable directory.
  D=$NH/cache-shared
  nobody_dir "$D" 770
  EXTRA_ENV=(KCACHE_ALLOW_SHARED_DIR=1)
  kn compile k.cu --arch sm_90 -j 1
  EXTRA_ENV=()
  finished "allowed shared directory: compile" && want_rc "allowed shared directory: compile" 0
  [ "$(entries "$D")" -eq 1 ] || bad "KCACHE_ALLOW_SHARED_DIR=1: compile stored nothing in the group-writable directory ($(said))"
  finish
  ;;

# 7. `-c -M SIZE` and `-c -F N` do what --help says: applied once (kcache.conf unchanged) or
#    set for good (kcache.conf holds the new budget), and the cleanup applies it either way.
cleanup_budget_flags)
  kernel_cu k.cu
  kn --help
  help=$OUT
  for spec in "M:max-size:max_size:1k:8Gi" "F:max-files:max_files:1:500"; do
    IFS=: read -r flag long key value old <<<"$spec"
    line=$(grep -E -- "-$flag,--$long" <<<"$help")
    [ -n "$line" ] || { bad "--help has no -$flag,--$long line"; continue; }
    # What the flag itself does is the line's first clause (a later one may say how to do the
    # other thing: "For one cleanup only: KCACHE_MAX_SIZE=… kcache -c"). Words of "once" first
    # (it may say "once, kcache.conf unchanged"), then of "for good"; a clause that says neither
    # ("the budget to apply") promises no more than this cleanup.
    line=$(sed -E 's/^ *-[A-Za-z],--[a-z-]+ +[A-Z]+ +//; s/[.;].*//' <<<"$line")
    if grep -qiE 'once|this (run|time|cleanup)|unchanged|not (saved|written|kept|stored)|only' <<<"$line"; then
      promise=once
    elif grep -qiE 'kcache\.conf|for good|persist|sav(e|es|ed)|writ|sets? |stor' <<<"$line"; then
      promise=persist
    else
      promise=once
    fi
    note "-$flag: --help says '$(sed 's/  */ /g' <<<"$line")': $promise"
    D=$NH/cache-$flag
    for s in 1 2 3; do kn compile k.cu --arch sm_90 -j 1 -D SCALE=$s.0f; done
    kn -o "$key=$old"
    want_rc "-o $key=$old" 0
    conf_before=$(cat "$D/kcache.conf" 2>/dev/null)
    kn -c -$flag "$value"
    finished "-c -$flag $value" && want_rc "-c -$flag $value" 0
    case $flag in
      M) [ "$(entry_bytes "$D")" -le 1024 ] || bad "-c -M 1k left $(entry_bytes "$D") bytes of entries" ;;
      F) [ "$(entries "$D")" -le 1 ] || bad "-c -F 1 left $(entries "$D") entries" ;;
    esac
    kn -k "$key"
    got=$OUT
    if [ "$promise" = once ]; then
      [ "$(cat "$D/kcache.conf" 2>/dev/null)" = "$conf_before" ] ||
        bad "--help says -$flag applies once, yet 'kcache -c -$flag $value' rewrote kcache.conf: $(tr '\n' '|' <"$D/kcache.conf")"
      [ "$got" = "$old" ] || bad "--help says -$flag applies once, yet $key is now '$got' (was '$old')"
    else
      [ "$got" = "$value" ] || bad "--help says -$flag sets the budget for good, yet $key is '$got' after -c -$flag $value"
    fi
  done
  finish
  ;;

# 8. The statistics add up: N compiles and M hits are counted once each; a rejected entry is
#    not a hit; no percentage above 100.
stats_add_up)
  for f in a b c; do kernel_cu "$f.cu" "1.${#f}f"; done
  sed -i 's/scale/scale_b/' b.cu; sed -i 's/scale/scale_c/' c.cu
  json_num() { grep -o "\"$1\": [0-9.]*" <<<"$2" | head -1 | grep -o '[0-9.]*$'; }
  disk_num() { tr -d '\n' <<<"$2" | grep -o '"disk": {[^}]*}' | grep -o "\"$1\": [0-9]*" | grep -o '[0-9]*$'; }
  # A pre-warm's requests are prebuilds, not lookups: they count as prebuilds (and the compiles
  # among them), never as hits or misses of lookups, of the map or of the disk tier.
  expect_stats() {  # expect_stats WHEN compiles prebuilds prebuild_compiles disk_writes corrupt entries
    kn -s --json
    finished "$1: -s --json" || return
    local got
    for pair in "compiles:$2" "compile_failures:0" "prebuilds:$3" "prebuild_compiles:$4" \
                "lookups:0" "entries:$7"; do
      got=$(json_num "${pair%%:*}" "$OUT")
      [ "$got" = "${pair#*:}" ] || bad "$1: ${pair%%:*} is '$got', expected ${pair#*:} ($(said))"
    done
    for pair in "hits:0" "misses:0" "writes:$5" "corrupt:$6" "errors:0"; do
      [ "${pair#*:}" = - ] && continue
      got=$(disk_num "${pair%%:*}" "$OUT")
      [ "$got" = "${pair#*:}" ] || bad "$1: disk.${pair%%:*} is '$got', expected ${pair#*:} ($(said))"
    done
    kn -s
    finished "$1: -s" || return
    local pct
    pct=$(grep -oE '[0-9]+(\.[0-9]+)?%' <<<"$OUT" | tr -d % | awk '$1 > 100' | head -1)
    [ -z "$pct" ] || bad "$1: -s shows ${pct}% ($(said))"
    grep -qiE "^ *(entries|files):.*\b$7\b" <<<"$OUT" || bad "$1: -s does not show $7 entries plainly ($(said))"
  }
  kn compile a.cu b.cu c.cu --arch sm_90 -j 1
  want_rc "3 compiles" 0
  expect_stats "after 3 compiles" 3 3 3 3 0 3
  kn compile a.cu b.cu c.cu --arch sm_90 -j 1
  kn compile a.cu b.cu c.cu --arch sm_90 -j 1
  want_in "2 re-runs" "$OUT" "3 already in the cache"
  expect_stats "after 3 compiles and 2 re-runs" 3 9 3 3 0 3
  # A corrupt entry: found, rejected, recompiled. Not a hit.
  FP=$(first_fp); printf 'junk' >>"$(entry_path "$FP")"
  kn compile a.cu b.cu c.cu --arch sm_90 -j 1
  expect_stats "after a corrupt entry was recompiled" 4 12 4 4 1 3
  finish
  ;;

# 9. One bad setting does not drop the others: the disk tier (and every good setting) stays,
#    the bad one is named once on stderr; `log` in kcache.conf logs as KCACHE_LOG does.
bad_setting_keeps_others)
  kernel_cu k.cu
  demo_keeps_disk() {  # demo_keeps_disk NAME NAMED_REGEX: demo --json still fills $D
    kn demo --json
    finished "$1: demo" || return
    [ "$(entries "$D")" -gt 0 ] || bad "$1: demo stored nothing in the cache directory ($(said))"
    want_in "$1: demo names the bad setting" "$ERR" "$2"
    local n
    n=$(grep -ciE -- "$2" <<<"$ERR")
    [ "$n" -le 1 ] || bad "$1: the bad setting is named $n times, not once ($(said))"
  }
  for bad_env in KCACHE_MAX_SIZE=bogus KCACHE_MAX_FILES=-3 KCACHE_VERIFY=maybe KCACHE_MAX_ENTRIES=lots; do
    var=${bad_env%%=*}
    D=$NH/cache-$var
    EXTRA_ENV=("$bad_env")
    demo_keeps_disk "$bad_env" "$var"
    # A safety option that was asked for stays on, next to the bad one.
    EXTRA_ENV=("$bad_env" KCACHE_VERIFY=1)
    [ "$var" = KCACHE_VERIFY ] && EXTRA_ENV=("$bad_env" KCACHE_MAX_FILES=7)
    kn -p
    if finished "$bad_env: -p"; then
      want_in "$bad_env: -p names the bad variable" "$ERR" "$var"
      if [ "$var" = KCACHE_VERIFY ]; then
        grep -qE '^max_files +=  *7' <<<"$OUT" || bad "$bad_env: -p dropped KCACHE_MAX_FILES=7 ($(said))"
      else
        grep -qE '^verify +=  *1' <<<"$OUT" || bad "$bad_env: -p dropped KCACHE_VERIFY=1 ($(said))"
      fi
    fi
  done
  EXTRA_ENV=()
  # An unreadable kcache.conf, and one with a bad line among good ones.
  D=$NH/cache-unreadable
  nobody_dir "$D"; echo "max_files = 9" >"$D/kcache.conf"
  chown "$NOBODY_UID:$NOBODY_GID" "$D/kcache.conf"; chmod 000 "$D/kcache.conf"
  demo_keeps_disk "unreadable kcache.conf" "kcache\.conf"
  D=$NH/cache-badline
  nobody_dir "$D"; printf '%s\n' "max_files = 9" "max_size = bogus" "verify = 1" >"$D/kcache.conf"
  chown "$NOBODY_UID:$NOBODY_GID" "$D/kcache.conf"
  demo_keeps_disk "a bad line in kcache.conf" "kcache\.conf"
  kn -p
  if finished "a bad line in kcache.conf: -p"; then
    grep -qE '^max_files +=  *9' <<<"$OUT" || bad "a bad line in kcache.conf: -p dropped max_files = 9 ($(said))"
    grep -qE '^verify +=  *1' <<<"$OUT" || bad "a bad line in kcache.conf: -p dropped verify = 1 ($(said))"
    grep -iE 'kcache\.conf' <<<"$ALL" | grep -qE '(:|line )2([^0-9]|$)' || bad "a bad line in kcache.conf: -p does not name kcache.conf, line 2 ($(said))"
  fi
  finish
  ;;

# 9. `log` in kcache.conf logs as KCACHE_LOG does (a miss that has a near entry says so).
conf_log_applies)
  kernel_cu k.cu
  for level in 1 info debug; do
    D=$NH/cache-log-env-$level
    kn compile k.cu --arch sm_90 -j 1 -D SCALE=1.0f
    EXTRA_ENV=("KCACHE_LOG=$level")
    kn compile k.cu --arch sm_90 -j 1 -D SCALE=2.0f
    EXTRA_ENV=()
    env_lines=$(grep -c '^kcache:' <<<"$ERR")
    D=$NH/cache-log-conf-$level
    kn compile k.cu --arch sm_90 -j 1 -D SCALE=1.0f
    echo "log = $level" >"$D/kcache.conf"; chown "$NOBODY_UID:$NOBODY_GID" "$D/kcache.conf"
    kn compile k.cu --arch sm_90 -j 1 -D SCALE=2.0f
    conf_lines=$(grep -c '^kcache:' <<<"$ERR")
    if [ "$env_lines" -eq 0 ]; then
      note "log = $level: KCACHE_LOG=$level logs nothing here either; nothing to compare"
    elif [ "$conf_lines" -lt "$env_lines" ]; then
      bad "log = $level in kcache.conf: $conf_lines 'kcache:' lines, KCACHE_LOG=$level gives $env_lines ($(said))"
    fi
  done
  finish
  ;;

# 10. Waiting on another process is bounded: a process stopped (SIGSTOP) while it holds an
#     entry's compile lock, cleanup.lock or the stats shards' locks costs a bounded wait, never
#     a hang: compile still compiles, -C clears or says plainly that another process holds it.
stopped_lock_holder|stopped_stats_lock_holder)
  command -v flock >/dev/null 2>&1 || skip "needs flock (util-linux)"
  kernel_cu k.cu
  hold() {  # hold FILE...: a process that locks every FILE, then is stopped
    local pid
    ( for f in "$@"; do exec {fd}>>"$f"; flock "$fd"; done; exec sleep 600 ) &
    pid=$!
    HOLDERS+=("$pid")
    local i
    for i in $(seq 1 100); do
      flock -n "${@: -1}" true 2>/dev/null || break
      sleep 0.1
    done
    kill -STOP "$pid"
    note "locked and stopped by pid $pid: $*"
  }
  D=$NH/cache
  kn compile k.cu --arch sm_90 -j 1
  want_rc "first compile" 0
  FP=$(first_fp)
  ENTRY=$(entry_path "$FP")
  if [ "$CASE" = stopped_lock_holder ]; then
    [ -e "$ENTRY.lock" ] || as_nobody touch "$ENTRY.lock"
    rm -f "$ENTRY"
    hold "$ENTRY.lock"
    kn compile k.cu --arch sm_90 -j 1
    if finished "compile while a stopped process holds the entry's lock"; then
      want_rc "compile while a stopped process holds the entry's lock" 0 &&
        want_in "compile while a stopped process holds the entry's lock" "$OUT" "1 compiled"
    fi
    kn compile k.cu --arch sm_90 -j 1 -D SCALE=5.0f
    finished "compile of another kernel meanwhile" && want_rc "compile of another kernel meanwhile" 0
    [ -e "$D/cleanup.lock" ] || as_nobody touch "$D/cleanup.lock"
    hold "$D/cleanup.lock"
    EXTRA_ENV=(KCACHE_MAX_FILES=1)
    kn compile k.cu --arch sm_90 -j 1 -D SCALE=6.0f
    finished "compile past the budget while a stopped process holds cleanup.lock"
    EXTRA_ENV=()
    kn -c
    finished "-c while a stopped process holds cleanup.lock"
    kn --evict-older-than 1d
    finished "--evict-older-than while a stopped process holds cleanup.lock"
    note "--evict-older-than 1d: $(said)"
    kn -C
    note "-C: $(said)"
    if finished "-C while a stopped process holds cleanup.lock"; then
      if [ "$RC" -eq 0 ]; then
        [ "$(entries "$D")" -eq 0 ] || bad "-C exited 0 and left $(entries "$D") entries ($(said))"
      else
        want_rc "-C that could not clear" 1
        want_in "-C says another process holds the lock" "$ERR" "lock|another process|held|busy"
      fi
    fi
  else
    shards=()
    for n in 0 1 2 3 4 5 6 7 8 9 a b c d e f; do
      [ -e "$D/stats/$n.lock" ] || as_nobody touch "$D/stats/$n.lock"
      shards+=("$D/stats/$n.lock")
    done
    hold "${shards[@]}"
    for cmd in "compile k.cu --arch sm_90 -j 1 -D SCALE=8.0f" "-s" "-s --json" "demo --json" "-z"; do
      # shellcheck disable=SC2086
      kn $cmd
      finished "kcache $cmd while a stopped process holds the stats locks"
      note "kcache $cmd: $(said)"
    done
  fi
  finish
  ;;

# 11. Leftovers are visible and removable: a killed writer's temporary shows in -s and goes
#     with -C.
leftovers_temporaries)
  kernel_cu k.cu
  kn compile k.cu --arch sm_90 -j 1
  FP=$(first_fp)
  TMP=$(entry_path "$FP").tmp.host.123.456
  as_nobody head -c 3000 /dev/urandom >"$TMP"; chown "$NOBODY_UID:$NOBODY_GID" "$TMP"
  touch -d '2 hours ago' "$TMP"
  kn -s
  if finished "-s"; then
    line=$(grep -v '^Cache directory' <<<"$OUT" | grep -iE 'temporar|leftover|stale')
    [ -n "$line" ] && grep -qE '[1-9]' <<<"$line" ||
      bad "-s does not show the stale temporary (a count or its bytes) ($(said))"
  fi
  kn -s --json
  finished "-s --json" && { grep -qiE '"[a-z_]*(temporar|leftover|stale|tmp)[a-z_]*": [1-9]' <<<"$OUT" ||
    bad "-s --json does not count the stale temporary ($(said))"; }
  kn -C
  finished "-C" && want_rc "-C" 0
  [ ! -e "$TMP" ] || bad "-C left the stale temporary $(basename "$TMP") ($(said))"
  finish
  ;;

# 11. A directory or FIFO at an entry's path is removed by `verify --repair` and by -C, after
#     which the entry is stored again.
leftovers_non_files)
  kernel_cu k.cu
  for kind in directory fifo; do
    for remover in "verify --repair" "-C"; do
      D=$NH/cache-$kind-${remover// /}
      kn compile k.cu --arch sm_90 -j 1
      FP=$(first_fp)
      ENTRY=$(entry_path "$FP")
      rm -f "$ENTRY"
      case $kind in
        directory) as_nobody mkdir "$ENTRY" ;;
        fifo) as_nobody mkfifo "$ENTRY" ;;
      esac
      # shellcheck disable=SC2086
      kn $remover
      finished "$kind at an entry's path: kcache $remover"
      if [ -e "$ENTRY" ] && [ ! -f "$ENTRY" ]; then
        bad "$kind at an entry's path: 'kcache $remover' left it there ($(said))"
      fi
      kn compile k.cu --arch sm_90 -j 1
      finished "$kind: compile after $remover" && want_rc "$kind: compile after $remover" 0
      [ -f "$ENTRY" ] || bad "$kind: after 'kcache $remover' and a compile, the entry is not a stored file"
    done
  done
  finish
  ;;

# 11. A symbolic-link cache directory the user set (~/.cache/kcache -> a bigger disk, both
#     theirs) is accepted, or refused with a plain message: never silently diskless.
symlinked_cache_dir)
  kernel_cu k.cu
  nobody_dir "$NH/.cache"; nobody_dir "$NH/big"; nobody_dir "$NH/big/kcache"
  as_nobody ln -s "$NH/big/kcache" "$NH/.cache/kcache"
  as_nobody ln -s "$NH/big/kcache" "$NH/kcache-link"
  for via in default KCACHE_DIR; do
    case $via in
      default) D= ;;
      KCACHE_DIR) D=$NH/kcache-link ;;
    esac
    n=$(entries "$NH/big/kcache")
    kn compile k.cu --arch sm_90 -j 1 -D SCALE=$RANDOM.0f
    finished "$via: compile through the link" || continue
    if [ "$RC" -eq 0 ]; then
      [ "$(entries "$NH/big/kcache")" -gt "$n" ] ||
        bad "$via: compile through a symlinked cache directory exited 0 and stored nothing ($(said))"
    else
      want_rc "$via: compile through a refused symlinked directory" 1
      want_in "$via: a refused symlinked directory is said plainly" "$ERR" "link"
    fi
    kn demo --json
    finished "$via: demo through the link" || continue
    if [ "$(entries "$NH/big/kcache")" -eq 0 ] && ! grep -qi link <<<"$ERR"; then
      bad "$via: demo through a symlinked cache directory was silently diskless ($(said))"
    fi
  done
  finish
  ;;

# 11. A refused or unusable directory is reported on stderr by default (no KCACHE_LOG), once.
unusable_dir_reported)
  mkdir -p "$W/root-owned" "$W/root-parent"; chmod 755 "$W/root-owned" "$W/root-parent"
  echo "a file" >"$W/a-file"; chmod 644 "$W/a-file"
  for spec in "refused:$W/root-owned" "not-a-directory:$W/a-file" "cannot-create:$W/root-parent/cache"; do
    name=${spec%%:*}; D=${spec#*:}
    for cmd in "demo --json" "demo"; do
      # shellcheck disable=SC2086
      kn $cmd
      finished "$name: $cmd" || continue
      n=$(grep -cF -- "$D" <<<"$ERR")
      if [ "$n" -eq 0 ]; then
        bad "$name: 'kcache $cmd' works without the directory $D and says nothing on stderr ($(said))"
      elif [ "$n" -gt 1 ]; then
        bad "$name: 'kcache $cmd' names the directory $n times, not once ($(said))"
      fi
    done
  done
  finish
  ;;

# 12. Read-only mode: a cache directory baked by root (mode 0755, entries readable) is read by
#     nobody with KCACHE_READ_ONLY=1 and nothing in it changes; without it, it is refused with a
#     word about read-only mode.
read_only_mode)
  kernel_cu k.cu
  D=$W/baked
  env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root KCACHE_DIR="$D" timeout 60 "$K" compile k.cu --arch sm_90 -j 1 >/dev/null 2>&1
  env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root KCACHE_DIR="$D" timeout 60 "$K" demo --json >/dev/null 2>&1
  chmod -R a+rX,go-w "$D"
  [ "$(entries "$D")" -gt 1 ] || bad "setup: root's compile and demo stored $(entries "$D") entries"
  before=$(snapshot "$D")
  unchanged() {  # unchanged WHAT: the directory is as it was before WHAT (each change once)
    local now
    now=$(snapshot "$D")
    [ "$now" = "$before" ] || bad "read-only: '$1' changed the directory: $(diff <(echo "$before") <(echo "$now") | grep '^[<>]' | head -4 | tr '\n' '|')"
    before=$now
  }
  EXTRA_ENV=(KCACHE_READ_ONLY=1)
  kn compile k.cu --arch sm_90 -j 1
  if finished "read-only: compile of a cached file"; then
    want_rc "read-only: compile of a cached file" 0
    want_in "read-only: compile of a cached file" "$OUT" "1 already in the cache"
  fi
  unchanged "compile of a cached file"
  kn demo --json
  if finished "read-only: demo"; then
    grep -qE '"disk_hits": [1-9]' <<<"$OUT" || bad "read-only: demo read nothing from the directory ($(said))"
    grep -qE '"compiles": 0' <<<"$OUT" || bad "read-only: demo compiled what the directory has ($(said))"
  fi
  unchanged "demo"
  kn compile k.cu --arch sm_90 -j 1 -D SCALE=9.0f
  finished "read-only: compile of a new kernel"
  unchanged "compile of a new kernel"
  kn -s
  finished "read-only: -s" && want_in "read-only: -s says so" "$OUT" "read.only"
  for cmd in "-s --json" "ls" "verify" "-z" "-C" "-c" "verify --repair"; do
    # shellcheck disable=SC2086
    kn $cmd
    finished "read-only: $cmd"
    unchanged "$cmd"
  done
  # The user's own directory in read-only mode: nobody could write here, and writes nothing
  # (not the corrupt entry's removal, not the stale temporary's, not the stats, not a recency
  # stamp).
  D=$NH/own
  EXTRA_ENV=()
  for s in 1 2 3; do kn compile k.cu --arch sm_90 -j 1 -D SCALE=$s.0f; done
  kn demo --json
  FP=$(first_fp); printf 'junk' >>"$(entry_path "$FP")"
  TMP=$(entry_path "$FP").tmp.host.123.456
  as_nobody touch -d '2 hours ago' "$TMP"
  before=$(snapshot "$D")
  EXTRA_ENV=(KCACHE_READ_ONLY=1)
  kn compile k.cu --arch sm_90 -j 1 -D SCALE=2.0f -D SCALE2=1
  finished "own directory, read-only: compile of a new kernel"
  unchanged "compile of a new kernel (own directory)"
  # Lookups, listings and checks only: whether an explicit -C, -z, -c or `verify --repair` may
  # write in read-only mode is for the fix to say (ccache's read_only still counts statistics).
  for cmd in "verify" "ls" "-s" "-s --json" \
             "compile k.cu --arch sm_90 -j 1 -D SCALE=1.0f" "compile k.cu --arch sm_90 -j 1 -D SCALE=3.0f" \
             "demo --json"; do
    # shellcheck disable=SC2086
    kn $cmd
    finished "own directory, read-only: $cmd"
    unchanged "$cmd (own directory)"
  done
  D=$W/baked
  before=$(snapshot "$D")
  EXTRA_ENV=()
  kn compile k.cu --arch sm_90 -j 1
  if finished "root's directory without read-only mode: compile"; then
    want_rc "root's directory without read-only mode: compile" 1
    want_in "root's directory without read-only mode: refused" "$ERR" "refus"
    want_in "root's directory without read-only mode: suggests read-only mode" "$ERR" "read.only"
  fi
  unchanged "compile without read-only mode"
  finish
  ;;

# 13. Errors as values: a bad arch is a usage error (exit 2, a clear message) and an arch that
#     no compiler knows is a failure with a message, never an abort or nvJitLink's "fatal".
bad_archs)
  kernel_cu k.cu
  printf '%s\n' '.version 7.0' '.target sm_50' '.address_size 64' \
    '.visible .entry noop() { ret; }' >k.ptx
  chmod 644 k.ptx
  for file in k.ptx k.cu; do
    for arch in sm_7 sm_1 sm_9999 sm_0 sm_07 sm_49 sm_ sm_x sm_-1 sm_99999999999999999999; do
      kn compile "$file" --arch "$arch" -j 1
      finished "$file --arch $arch" || continue
      want_rc "$file --arch $arch" 2
      want_in "$file --arch $arch: the message names the arch" "$ERR" "arch"
      want_not_in "$file --arch $arch" "$ALL" "fatal"
    done
    for arch in sm_55 sm_99 sm_999 sm_91; do
      kn compile "$file" --arch "$arch" -j 1
      finished "$file --arch $arch" || continue
      [ "$RC" -eq 1 ] || [ "$RC" -eq 2 ] || bad "$file --arch $arch: exit $RC, expected 1 or 2 ($(said))"
      want_in "$file --arch $arch: the message names the arch" "$ERR" "arch|sm_"
      want_not_in "$file --arch $arch" "$ALL" "fatal"
    done
  done
  [ "$(entries "$D")" -eq 0 ] || bad "a bad arch stored an entry"
  finish
  ;;

*)
  echo "FAIL ($CASE): no such case"; exit 1
  ;;
esac
