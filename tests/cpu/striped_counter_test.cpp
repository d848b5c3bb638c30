// SPDX-License-Identifier: Apache-2.0
// Per-thread slots and the counters striped over them: exact sums with no locked instruction,
// whatever the number of threads and however often slots change hands.
#include "util/striped_counter.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <latch>
#include <set>
#include <thread>
#include <vector>

#include "util/thread_slot.hpp"

namespace kcache::util {
namespace {

TEST(ThreadSlot, ThreadsAliveAtOnceHoldDistinctSlots) {
    constexpr int kThreads = 12;
    std::vector<std::uint32_t> slots(kThreads);
    std::latch all_claimed(kThreads);
    std::vector<std::thread> threads;
    threads.reserve(kThreads);
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            slots[static_cast<std::size_t>(t)] = thread_slot();
            all_claimed.arrive_and_wait();  // nobody ends, so nobody gives a slot back, before all
            EXPECT_EQ(thread_slot(), slots[static_cast<std::size_t>(t)]) << "a slot is kept";
        });
    }
    for (auto& thread : threads) thread.join();
    EXPECT_EQ(std::set<std::uint32_t>(slots.begin(), slots.end()).size(), slots.size());
}

TEST(ThreadSlot, ASlotIsTakenAgainAfterItsThreadEnds) {
    // Threads one after another: each gives its slot back, so the slots stay few however many
    // threads come and go.
    std::set<std::uint32_t> seen;
    for (int t = 0; t < 100; ++t) {
        std::uint32_t slot = 0;
        std::thread([&] { slot = thread_slot(); }).join();
        seen.insert(slot);
    }
    EXPECT_LE(seen.size(), 4u) << "ended threads' slots were not given back";
}

TEST(StripedCounter, CountsStayExactAcrossMoreThreadsThanStripesAndReusedSlots) {
    StripedCounter counter;
    constexpr int kWaves = 4;
    constexpr int kThreads = static_cast<int>(kStripes) + 8;  // some share the overflow stripe
    constexpr int kAdds = 2000;
    for (int wave = 0; wave < kWaves; ++wave) {
        std::latch start(kThreads);
        std::vector<std::thread> threads;
        threads.reserve(kThreads);
        for (int t = 0; t < kThreads; ++t) {
            threads.emplace_back([&] {
                start.arrive_and_wait();
                for (int i = 0; i < kAdds; ++i) counter.add();
            });
        }
        for (auto& thread : threads) thread.join();
    }
    EXPECT_EQ(counter.sum(), static_cast<std::uint64_t>(kWaves) * kThreads * kAdds);
}

}  // namespace
}  // namespace kcache::util
