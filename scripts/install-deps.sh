#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the build dependencies from Debian's packages (idempotent: quick when all present).
# The CUDA toolkit (cuda.h) is expected at /usr/local/cuda, as on the project's machines;
# libcuda itself is optional (loaded at run time).
set -euo pipefail
# clang-14 and libclang-rt-14-dev (libFuzzer, clang's sanitizer runtimes) build the fuzz targets;
# g++ brings its own ASan, UBSan and TSan runtimes (scripts/test-hardening.sh).
# pkg-config builds the install test's consumer (tests/install/); nlohmann-json writes the
# command's JSON; clang-format-14 and clang-tidy-14 (with run-clang-tidy-14) run scripts/lint.sh.
# libhiredis-dev (the RESP protocol) and libssl-dev (signatures) build the remote tier;
# redis-server and redis-tools are what its tests start and break. python3-dev and python3-venv
# build and test the Python package (scripts/test-python.sh).
packages=(cmake g++ make python3-dev python3-venv libgtest-dev libxxhash-dev libcli11-dev libzstd-dev clang-14
  libclang-rt-14-dev pkg-config nlohmann-json3-dev clang-format-14 clang-tidy-14
  libhiredis-dev libssl-dev redis-server redis-tools)
# cargo runs the Rust crate's tests (bindings/rust); Debian's when none is on PATH.
command -v cargo >/dev/null || packages+=(cargo)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if [ ! -f /usr/local/cuda/include/cuda.h ] && [ -z "${CUDAToolkit_ROOT:-}" ]; then
  echo "install-deps: no CUDA toolkit at /usr/local/cuda (cuda.h is needed to build)" >&2
  exit 1
fi
