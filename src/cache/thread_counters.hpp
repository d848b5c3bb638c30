// SPDX-License-Identifier: Apache-2.0
// The calling thread's hit and miss counters (the seed's per-thread statistics).
#pragma once

#include "kcache/kernel_cache.hpp"

namespace kcache::cache {

inline ThreadStats& thread_counters() noexcept {
    thread_local ThreadStats counters;
    return counters;
}

}  // namespace kcache::cache
