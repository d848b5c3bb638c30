// SPDX-License-Identifier: Apache-2.0
// kcache's version: the one place it is written (CMake reads it from here).
#pragma once

#define KCACHE_VERSION_MAJOR 0
#define KCACHE_VERSION_MINOR 1
#define KCACHE_VERSION_PATCH 0
#define KCACHE_VERSION "0.1.0"

namespace kcache {

// The library's version as built, for a program to compare with the KCACHE_VERSION it was
// compiled against.
inline constexpr const char* kVersion = KCACHE_VERSION;

}  // namespace kcache
