// SPDX-License-Identifier: Apache-2.0
// XXH3 for the x86-64 baseline (SSE2), or whatever the target's default vector unit is.
#include "util/xxh3_kernels.hpp"

#define KCACHE_XXH3_VARIANT baseline_kernels
#include "util/xxh3_variant.inc"
