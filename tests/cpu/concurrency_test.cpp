// SPDX-License-Identifier: Apache-2.0
// The lock-free hit path under fire: hits racing clear(), eviction and handle churn must never
// touch an unloaded library, and every library must be unloaded exactly once in the end.
#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <latch>
#include <memory>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "child_process.hpp"
#include "kcache/kcache.hpp"
#include "test_support.hpp"
#include "testing/fake_driver.hpp"
#include "util/epoch.hpp"

namespace kcache {
namespace {

using fakes::FakeDriver;

constexpr int kHitters = 16;
constexpr int kIterations = 800;
// Races are probabilistic: a few short rounds catch more interleavings than one long one.
constexpr int kRounds = 3;
constexpr int kKeys = 8;

Result<KernelHandle> softmax(KernelCache& cache, int cols) {
    return cache.kernel(
        test::softmax_key(cols), [cols] { return test::softmax_source(cols); }, test::kSoftmax);
}

struct StormOutcome {
    int failed_lookups = 0;
    int failed_launches = 0;
    int clears = 0;
    int churned = 0;
};

// kHitters threads look up and launch kernels of kKeys keys while one thread clears the cache in
// a loop and another creates, copies, moves and drops handles. All start together on a latch.
StormOutcome storm_round(KernelCache& cache) {
    std::atomic<int> failed_lookups{0};
    std::atomic<int> failed_launches{0};
    std::atomic<int> clears{0};
    std::atomic<int> churned{0};
    std::atomic<bool> stop{false};
    std::latch start(kHitters + 2);

    std::vector<std::thread> hitters;
    for (int t = 0; t < kHitters; ++t) {
        hitters.emplace_back([&, t] {
            start.arrive_and_wait();
            for (int i = 0; i < kIterations; ++i) {
                auto handle = softmax(cache, 1 + (t + i) % kKeys);
                if (!handle.ok()) {
                    failed_lookups.fetch_add(1);
                    continue;
                }
                if (!test::launch_softmax(*handle).ok()) failed_launches.fetch_add(1);
            }
        });
    }
    std::thread clearer([&] {
        start.arrive_and_wait();
        while (!stop.load()) {
            cache.clear();
            clears.fetch_add(1);
            std::this_thread::yield();
        }
    });
    std::thread churner([&] {
        start.arrive_and_wait();
        std::vector<KernelHandle> kept;
        for (int i = 0; !stop.load(); ++i) {
            auto handle = softmax(cache, 1 + i % kKeys);
            if (!handle.ok()) {
                failed_lookups.fetch_add(1);
                continue;
            }
            KernelHandle copy = *handle;           // copy
            KernelHandle moved = std::move(copy);  // move
            ModuleHandle module = moved.module();  // copy of the module reference
            kept.push_back(std::move(moved));
            if (kept.size() > 4) kept.erase(kept.begin());  // drop the oldest
            if (!test::launch_softmax(kept.front()).ok()) failed_launches.fetch_add(1);
            churned.fetch_add(1);
        }
    });

    for (auto& hitter : hitters) hitter.join();
    // On a busy machine the hitters may finish before the other two threads are first scheduled:
    // each of them works at least once, against the other, before the round ends.
    while (clears.load() == 0 || churned.load() == 0) std::this_thread::yield();
    stop.store(true);
    clearer.join();
    churner.join();
    return {failed_lookups.load(), failed_launches.load(), clears.load(), churned.load()};
}

StormOutcome storm(KernelCache& cache) {
    StormOutcome total;
    for (int round = 0; round < kRounds; ++round) {
        const StormOutcome outcome = storm_round(cache);
        total.failed_lookups += outcome.failed_lookups;
        total.failed_launches += outcome.failed_launches;
        total.clears += outcome.clears;
        total.churned += outcome.churned;
    }
    return total;
}

// Runs the storm once per test, in a child process, on a cache of the given size.
class ClearRacingTest : public ::testing::TestWithParam<std::size_t> {
protected:
    std::shared_ptr<FakeDriver> fake = std::make_shared<FakeDriver>();
    KernelCache cache{test::fake_options(fake, GetParam())};
};

TEST_P(ClearRacingTest, NoLibraryIsUsedAfterUnload) {
    test::expect_in_child_process([&] {
        const StormOutcome outcome = storm(cache);
        ASSERT_GT(outcome.clears, 0) << "the clearing thread never ran";
        ASSERT_GT(outcome.churned, 0) << "the handle-churning thread never ran";
        EXPECT_EQ(fake->use_after_unload(), 0);
        EXPECT_EQ(outcome.failed_launches, 0);
    });
}

TEST_P(ClearRacingTest, EveryLookupSucceeds) {
    test::expect_in_child_process([&] {
        const StormOutcome outcome = storm(cache);
        EXPECT_EQ(outcome.failed_lookups, 0);
        EXPECT_GE(fake->launches(), kRounds * kHitters * kIterations);
    });
}

TEST_P(ClearRacingTest, EveryLibraryIsUnloadedExactlyOnceAfterFinalClear) {
    test::expect_in_child_process([&] {
        storm(cache);
        cache.clear();
        util::EpochDomain::global().synchronize();

        EXPECT_EQ(fake->live_libraries(), 0);
        EXPECT_EQ(fake->loads(), fake->unloads());
        EXPECT_EQ(fake->use_after_unload(), 0) << "a library was unloaded twice";
        EXPECT_EQ(cache.stats().loaded_libraries, 0u);
    });
}

// ConstantEviction guards a fixed crash: evict_over_budget once sorted with a comparator reading
// live reference counts and recency, which other threads change during the sort.
INSTANTIATE_TEST_SUITE_P(Concurrency, ClearRacingTest, ::testing::Values(1024u, 2u),
                         [](const ::testing::TestParamInfo<std::size_t>& param_info) {
                             return param_info.param == 2 ? "ConstantEviction" : "NoEviction";
                         });

// --- handles crossing threads -------------------------------------------------------------------

TEST(HandleAcrossThreads, CopiesOnOtherThreadsKeepTheLibraryLoadedAfterTheOriginalGoes) {
    auto fake = std::make_shared<FakeDriver>();
    KernelCache cache(test::fake_options(fake));
    auto result = softmax(cache, 32);
    ASSERT_TRUE(result.ok());
    std::optional<KernelHandle> original(std::move(result).value());
    cache.clear();  // from now on only handles keep the library loaded

    constexpr int kThreads = 8;
    std::latch copied(kThreads);
    std::latch original_gone(1);
    std::latch launched(kThreads);
    std::latch may_drop(1);
    std::atomic<int> failed{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&] {
            KernelHandle mine = *original;
            copied.count_down();
            original_gone.wait();
            for (int i = 0; i < 50; ++i) {
                if (!test::launch_softmax(mine).ok()) failed.fetch_add(1);
            }
            launched.count_down();
            may_drop.wait();
        });
    }
    copied.wait();
    original.reset();
    original_gone.count_down();
    launched.wait();

    EXPECT_EQ(failed.load(), 0);
    EXPECT_EQ(fake->unloads(), 0) << "unloaded while copies on other threads were alive";
    EXPECT_EQ(fake->live_libraries(), 1);

    may_drop.count_down();
    for (auto& thread : threads) thread.join();
    util::EpochDomain::global().synchronize();
    EXPECT_EQ(fake->unloads(), 1);
    EXPECT_EQ(fake->use_after_unload(), 0);
}

TEST(HandleAcrossThreads, HandleMovedToAnotherThreadKeepsTheLibraryLoaded) {
    auto fake = std::make_shared<FakeDriver>();
    KernelCache cache(test::fake_options(fake));
    auto result = softmax(cache, 32);
    ASSERT_TRUE(result.ok());
    KernelHandle handle = std::move(result).value();

    std::latch cleared(1);
    std::latch launched(1);
    std::latch may_drop(1);
    bool launch_ok = false;
    std::thread owner([&, moved = std::move(handle)]() mutable {
        cleared.wait();
        launch_ok = test::launch_softmax(moved).ok();
        launched.count_down();
        may_drop.wait();
        moved = KernelHandle();  // released on this thread
    });
    cache.clear();
    cleared.count_down();
    launched.wait();

    EXPECT_TRUE(launch_ok);
    EXPECT_EQ(fake->unloads(), 0);

    may_drop.count_down();
    owner.join();
    util::EpochDomain::global().synchronize();
    EXPECT_EQ(fake->unloads(), 1);
    EXPECT_EQ(fake->live_libraries(), 0);
    EXPECT_EQ(fake->use_after_unload(), 0);
}

TEST(HandleAcrossThreads, AssigningOverAHandleReleasesItsOldEntry) {
    auto fake = std::make_shared<FakeDriver>();
    KernelCache cache(test::fake_options(fake));
    auto first = cache.module(test::softmax_key(1), [] { return test::softmax_source(1); });
    auto second = cache.module(test::softmax_key(2), [] { return test::softmax_source(2); });
    ASSERT_TRUE(first.ok() && second.ok());
    ModuleHandle handle = std::move(first).value();
    const ModuleHandle other = std::move(second).value();
    cache.clear();  // only the two handles keep the libraries loaded now
    ASSERT_EQ(fake->unloads(), 0);

    handle = other;  // drops the last reference to softmax:1

    util::EpochDomain::global().synchronize();
    EXPECT_EQ(fake->unloads(), 1);
    EXPECT_EQ(fake->live_libraries(), 1);
    EXPECT_EQ(handle.key(), test::softmax_key(2));
}

TEST(HandleAcrossThreads, HitsOnManyThreadsThatComeAndGoAreCountedExactly) {
    // Hits are counted on per-thread stripes without a locked instruction; threads ending and
    // new ones taking their stripes must lose no count, nor the per-thread windows mix.
    auto fake = std::make_shared<FakeDriver>();
    KernelCache cache(test::fake_options(fake));
    ASSERT_TRUE(softmax(cache, 32).ok());  // the miss
    constexpr int kWaves = 3;
    constexpr int kThreads = 40;  // more than there are stripes
    constexpr int kHits = 200;
    std::atomic<int> wrong_window{0};
    for (int wave = 0; wave < kWaves; ++wave) {
        std::latch start(kThreads);
        std::vector<std::thread> threads;
        threads.reserve(kThreads);
        for (int t = 0; t < kThreads; ++t) {
            threads.emplace_back([&] {
                start.arrive_and_wait();
                reset_thread_stats();
                for (int i = 0; i < kHits; ++i) {
                    if (!softmax(cache, 32).ok()) wrong_window.fetch_add(1000);
                }
                if (thread_stats().hits != kHits || thread_stats().misses != 0) {
                    wrong_window.fetch_add(1);
                }
            });
        }
        for (auto& thread : threads) thread.join();
    }
    EXPECT_EQ(wrong_window.load(), 0);
    EXPECT_EQ(cache.stats().hits, std::uint64_t{kWaves} * kThreads * kHits);
    EXPECT_EQ(cache.stats().misses, 1u);
}

// Regression: eviction under concurrent handle traffic (see ConstantEviction above).
TEST(HandleAcrossThreads, ThreadsHoldingHandlesThroughConstantEvictionLeaveNothingLoaded) {
    test::expect_in_child_process([] {
        auto fake = std::make_shared<FakeDriver>();
        {
            KernelCache cache(test::fake_options(fake, 2));
            std::latch start(kHitters);
            std::vector<std::thread> threads;
            for (int t = 0; t < kHitters; ++t) {
                threads.emplace_back([&, t] {
                    start.arrive_and_wait();
                    std::vector<KernelHandle> kept;
                    for (int i = 0; i < 600; ++i) {
                        auto handle = softmax(cache, 1 + (t * 7 + i) % kKeys);
                        if (handle.ok()) kept.push_back(std::move(handle).value());
                        if (kept.size() > 3) kept.erase(kept.begin());
                    }
                });
            }
            for (auto& thread : threads) thread.join();
        }  // the cache goes with its entries; no handle is left
        util::EpochDomain::global().synchronize();

        EXPECT_GT(fake->loads(), kKeys);  // eviction really happened
        EXPECT_EQ(fake->live_libraries(), 0);
        EXPECT_EQ(fake->loads(), fake->unloads());
        EXPECT_EQ(fake->use_after_unload(), 0);
    });
}

}  // namespace
}  // namespace kcache
