// SPDX-License-Identifier: Apache-2.0
// A counter that many threads bump without sharing a cache line: each thread adds to its own
// stripe, and a reader sums the stripes. Reads are not a snapshot across stripes; they are for
// statistics, never for decisions.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "util/thread_ordinal.hpp"

namespace kcache::util {

inline constexpr std::size_t kStripes = 32;
inline constexpr std::size_t kCacheLine = 64;

inline std::uint32_t my_stripe() noexcept {
    return thread_ordinal() % static_cast<std::uint32_t>(kStripes);
}

class StripedCounter {
public:
    void add(std::uint64_t n = 1) noexcept {
        stripes_[my_stripe()].value.fetch_add(n, std::memory_order_relaxed);
    }
    std::uint64_t sum() const noexcept {
        std::uint64_t total = 0;
        for (const auto& stripe : stripes_) total += stripe.value.load(std::memory_order_relaxed);
        return total;
    }
    void reset() noexcept {
        for (auto& stripe : stripes_) stripe.value.store(0, std::memory_order_relaxed);
    }

private:
    struct alignas(kCacheLine) Stripe {
        std::atomic<std::uint64_t> value{0};
    };
    std::array<Stripe, kStripes> stripes_;
};

}  // namespace kcache::util
