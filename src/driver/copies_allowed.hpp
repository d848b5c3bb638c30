// SPDX-License-Identifier: Apache-2.0
// How many copies of nvJitLink (and NVRTC beside them) a process may load
// (driver/nvjitlink_copies.hpp): the environment's count, glibc's static TLS, sanitizers.
#pragma once

#include <cstddef>

namespace kcache::driver {

// KCACHE_NVJITLINK_COPIES when set (0: none; at most 15; not a count: none, warned once), else 3
// (fewer with fewer hardware threads). None in a build with a sanitizer, whose interceptors would
// not see into a copy's C library.
std::size_t copies_allowed_here();

}  // namespace kcache::driver
