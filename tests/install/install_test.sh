#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# kcache as a dependency (tests/install/consumer/): installs the already-built tree to a temporary
# prefix, then builds and runs a small program against it three ways: the CMake package's shared
# and static libraries, and pkg-config's flags on a plain compiler line; each in C++ (main.cpp)
# and in C99 through the C API (main.c, compiled by $CC or cc).
# Usage: install_test.sh BUILD_DIR WORK_DIR VERSION LIBDIR CXX [COMPILER_LAUNCHER]
set -euo pipefail
build=$1 work=$2 version=$3 libdir=$4 cxx=$5 launcher=${6:-}
here=$(cd "$(dirname "$0")" && pwd)
prefix=$work/prefix
rm -rf "$work"
mkdir -p "$work"

fail() {
    echo "install_test: $*" >&2
    exit 1
}

# Runs "$@" quietly; on failure shows what it printed.
quietly() {
    local log=$work/step.log
    if ! "$@" >"$log" 2>&1; then
        cat "$log" >&2
        fail "failed: $*"
    fi
}

# Runs a consumer; it prints the installed version and one lookup's outcome (no GPU needed).
check_runs() {
    local program=$1 out
    out=$("$program") || fail "$program exited $?: $out"
    echo "$out"
    grep -qx "kcache $version" <<<"$out" || fail "$program does not say kcache $version"
    grep -q '^stats: hits=0 misses=' <<<"$out" || fail "$program printed no stats"
}

quietly cmake --install "$build" --prefix "$prefix"

# What was installed: the SONAME'd shared library, the static one, the package and pkg-config
# files, the command, and headers that need no CUDA toolkit.
lib=$prefix/$libdir
for file in "libkcache.so.$version" "libkcache.so.${version%%.*}" libkcache.so libkcache.a \
    cmake/kcache/kcacheConfig.cmake cmake/kcache/kcacheConfigVersion.cmake \
    cmake/kcache/kcacheTargets.cmake pkgconfig/kcache.pc; do
    [ -e "$lib/$file" ] || fail "not installed: $libdir/$file"
done
[ -x "$prefix/bin/kcache" ] || fail "not installed: bin/kcache"
soname=$(objdump -p "$lib/libkcache.so" | awk '$1 == "SONAME" { print $2 }')
[ "$soname" = "libkcache.so.${version%%.*}" ] || fail "SONAME is '$soname'"
for header in kcache.hpp kernel_cache.hpp kcache.h; do
    [ -f "$prefix/include/kcache/$header" ] || fail "not installed: include/kcache/$header"
done
if grep -rlE '#include *[<"](cuda|nvrtc|nvJitLink)\.h' "$prefix/include"; then
    fail "an installed header includes the CUDA toolkit"
fi

# The CMake package.
launch=()
[ -z "$launcher" ] || launch=("-DCMAKE_CXX_COMPILER_LAUNCHER=$launcher" "-DCMAKE_C_COMPILER_LAUNCHER=$launcher")
quietly cmake -S "$here/consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_CXX_COMPILER="$cxx" "${launch[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DKCACHE_EXPECTED_VERSION="$version"
quietly cmake --build "$work/consumer"
objdump -p "$work/consumer/consumer_shared" | grep -q "NEEDED.*libkcache\.so\.${version%%.*}" ||
    fail "consumer_shared does not load libkcache.so"
if objdump -p "$work/consumer/consumer_static" | grep -q 'NEEDED.*libkcache'; then
    fail "consumer_static loads libkcache.so"
fi
objdump -p "$work/consumer/consumer_c_shared" | grep -q "NEEDED.*libkcache\.so\.${version%%.*}" ||
    fail "consumer_c_shared does not load libkcache.so"
for program in consumer_shared consumer_static consumer_c_shared consumer_c_static; do
    check_runs "$work/consumer/$program"
done

# pkg-config, as a Makefile would use it.
export PKG_CONFIG_PATH=$lib/pkgconfig
[ "$(pkg-config --modversion kcache)" = "$version" ] || fail "kcache.pc's version is not $version"
pkg-config --static --libs kcache | grep -q -- -lzstd || fail "kcache.pc's Libs.private lack -lzstd"
read -ra cflags <<<"$(pkg-config --cflags kcache)"
read -ra libs <<<"$(pkg-config --libs kcache)"
# shellcheck disable=SC2086 # no launcher: nothing
quietly $launcher "$cxx" -std=c++20 "${cflags[@]}" -DKCACHE_PACKAGE_VERSION="\"$version\"" \
    "$here/consumer/main.cpp" -o "$work/consumer_pkgconfig" "${libs[@]}" \
    "-Wl,-rpath,$(pkg-config --variable=libdir kcache)"
check_runs "$work/consumer_pkgconfig"
# The C API from a strict C99 compile, with the same flags.
# shellcheck disable=SC2086 # no launcher: nothing
quietly $launcher "${CC:-cc}" -std=c99 -pedantic -Wall -Wextra -Werror "${cflags[@]}" \
    -DKCACHE_PACKAGE_VERSION="\"$version\"" "$here/consumer/main.c" -o "$work/consumer_c_pkgconfig" \
    "${libs[@]}" "-Wl,-rpath,$(pkg-config --variable=libdir kcache)"
check_runs "$work/consumer_c_pkgconfig"
echo "install_test: CMake package (shared, static; C++ and C) and pkg-config (C++ and C) consumers built and ran"
