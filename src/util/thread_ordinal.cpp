// SPDX-License-Identifier: Apache-2.0
#include "util/thread_ordinal.hpp"

#include <atomic>

namespace kcache::util {

std::uint32_t thread_ordinal() noexcept {
    static std::atomic<std::uint32_t> next{0};
    thread_local const std::uint32_t ordinal = next.fetch_add(1, std::memory_order_relaxed);
    return ordinal;
}

}  // namespace kcache::util
