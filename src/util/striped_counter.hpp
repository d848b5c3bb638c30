// SPDX-License-Identifier: Apache-2.0
// A counter that many threads bump without sharing a cache line and without a locked
// instruction: each thread adds to a stripe that only it writes, and a reader sums the stripes.
// Reads are not a snapshot across stripes; they are for statistics, never for decisions.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "util/thread_slot.hpp"

namespace kcache::util {

inline constexpr std::size_t kStripes = 32;
inline constexpr std::size_t kCacheLine = 64;

// A stripe for counters that any thread may write (atomic read-modify-writes): threads live at
// the same time get different ones, up to kStripes of them.
inline std::uint32_t my_stripe() noexcept {
    return thread_slot() % static_cast<std::uint32_t>(kStripes);
}

class StripedCounter {
public:
    void add(std::uint64_t n = 1) noexcept {
        const std::uint32_t slot = thread_slot();
        if (slot < kStripes) {
            // Only this thread writes this stripe while it holds the slot, so a plain load and
            // store lose nothing; a later holder of the slot starts after this one ended.
            auto& value = stripes_[slot].value;
            value.store(value.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
        } else {
            shared_.value.fetch_add(n, std::memory_order_relaxed);  // threads beyond kStripes
        }
    }
    std::uint64_t sum() const noexcept {
        std::uint64_t total = shared_.value.load(std::memory_order_relaxed);
        for (const auto& stripe : stripes_) total += stripe.value.load(std::memory_order_relaxed);
        return total;
    }
    // Not while other threads add: a reset racing an add may lose either.
    void reset() noexcept {
        shared_.value.store(0, std::memory_order_relaxed);
        for (auto& stripe : stripes_) stripe.value.store(0, std::memory_order_relaxed);
    }

private:
    struct alignas(kCacheLine) Stripe {
        std::atomic<std::uint64_t> value{0};
    };
    std::array<Stripe, kStripes> stripes_;
    Stripe shared_;
};

}  // namespace kcache::util
