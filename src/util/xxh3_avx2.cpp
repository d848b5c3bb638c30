// SPDX-License-Identifier: Apache-2.0
// XXH3 for AVX2: this file alone is compiled with -mavx2 (CMakeLists.txt), and runs only where
// kernels() found the CPU able to. Elsewhere than x86-64 it is the baseline again.
#include "util/xxh3_kernels.hpp"

#define KCACHE_XXH3_VARIANT avx2_kernels
#include "util/xxh3_variant.inc"
