// SPDX-License-Identifier: Apache-2.0
// Time since a steady-clock start, as a count: what compile times and waits are kept and said in.
#pragma once

#include <chrono>
#include <cstdint>

namespace kcache::util {

template <class Unit = std::chrono::nanoseconds>
std::uint64_t elapsed_since(std::chrono::steady_clock::time_point start) noexcept {
    const auto count =
        std::chrono::duration_cast<Unit>(std::chrono::steady_clock::now() - start).count();
    return count > 0 ? static_cast<std::uint64_t>(count) : 0;
}

}  // namespace kcache::util
