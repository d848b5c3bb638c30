// SPDX-License-Identifier: Apache-2.0
// A small per-thread number, used to spread per-thread counters over separate cache lines.
#pragma once

#include <cstdint>

namespace kcache::util {

// Dense, assigned on a thread's first call, never reused while the process lives.
std::uint32_t thread_ordinal() noexcept;

}  // namespace kcache::util
