// SPDX-License-Identifier: Apache-2.0
// The threads of a warm-up's bundle phase (cache/warm_up_runners.hpp): Ahead gives every item
// once and in order, and starts no more threads than keep ahead of its caller.
#include "cache/warm_up_runners.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace kcache::cache {
namespace {

using namespace std::chrono_literals;

// What an Ahead's items saw: how many were made, and on which threads other than the caller's.
struct Made {
    std::atomic<std::size_t> count{0};
    std::mutex mutex;
    std::set<std::thread::id> threads;  // guarded by mutex

    std::size_t make(std::size_t k, std::thread::id caller) {
        if (std::this_thread::get_id() != caller) {
            std::lock_guard lock(mutex);
            threads.insert(std::this_thread::get_id());
        }
        count.fetch_add(1);
        return k;
    }
    std::size_t thread_count() {
        std::lock_guard lock(mutex);
        return threads.size();
    }
};

TEST(AheadTest, GivesEveryItemOnceInOrderWhetherTheCallerHelpsOrNot) {
    for (const bool caller_helps : {true, false}) {
        Made made;
        const auto caller = std::this_thread::get_id();
        constexpr std::size_t kCount = 200;
        Ahead<std::size_t> ahead(kCount, 4, caller_helps,
                                 [&](std::size_t k) { return made.make(k, caller); });
        for (std::size_t k = 0; k < kCount; ++k) ASSERT_EQ(ahead.take(k), k);
        EXPECT_EQ(made.count.load(), kCount);
    }
}

TEST(AheadTest, OneThreadThatKeepsAheadOfItsCallerIsTheOnlyOneStarted) {
    // Items of a few hundred microseconds (a bundle's read), taken only once made: the caller
    // never waits, so the first thread is enough. Each thread starting the next would have had
    // several making them.
    Made made;
    const auto caller = std::this_thread::get_id();
    constexpr std::size_t kCount = 20;
    Ahead<std::size_t> ahead(kCount, 4, /*caller_helps=*/true, [&](std::size_t k) {
        std::this_thread::sleep_for(300us);
        return made.make(k, caller);
    });
    for (std::size_t k = 0; k < kCount; ++k) {
        // After the first (which the caller may make while the first thread starts), each item
        // is waited for outside take(): the threads are never behind when it is taken. Done once
        // the next is made (or, for the last, a while after it is).
        if (k > 0 && k + 1 < kCount) {
            while (made.count.load() <= k + 1) std::this_thread::sleep_for(50us);
        } else if (k > 0) {
            while (made.count.load() < kCount) std::this_thread::sleep_for(50us);
            std::this_thread::sleep_for(10ms);
        }
        ASSERT_EQ(ahead.take(k), k);
    }
    EXPECT_EQ(made.thread_count(), 1u);
}

TEST(AheadTest, ACallerThatWaitsGetsMoreThreads) {
    // Items that take long (a remote tier's round trips): the caller finds each not done, and
    // another thread starts each time, up to the most.
    Made made;
    const auto caller = std::this_thread::get_id();
    constexpr std::size_t kCount = 12;
    Ahead<std::size_t> ahead(kCount, 3, /*caller_helps=*/true, [&](std::size_t k) {
        std::this_thread::sleep_for(20ms);
        return made.make(k, caller);
    });
    for (std::size_t k = 0; k < kCount; ++k) ASSERT_EQ(ahead.take(k), k);
    EXPECT_GE(made.thread_count(), 2u);
    EXPECT_LE(made.thread_count(), 3u);
}

}  // namespace
}  // namespace kcache::cache
