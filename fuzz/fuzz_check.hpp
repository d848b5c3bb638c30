// SPDX-License-Identifier: Apache-2.0
// What the fuzz targets share: a check that stops the run (libFuzzer then saves the input) when a
// property of a parser does not hold, in every build type.
#pragma once

#include <cstdio>
#include <cstdlib>

// assert() would vanish under NDEBUG; a broken round trip must always be a finding.
#define KCACHE_FUZZ_CHECK(condition)                                                           \
    do {                                                                                       \
        if (!(condition)) {                                                                    \
            std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #condition); \
            std::abort();                                                                      \
        }                                                                                      \
    } while (false)
