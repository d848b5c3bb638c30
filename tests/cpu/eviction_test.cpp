// SPDX-License-Identifier: Apache-2.0
// Eviction: the map keeps at most max_entries (key, arch) entries, dropping the least recently
// used, preferring entries no handle holds; an evicted library stays loaded while a handle lives.
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <vector>

#include "kcache/kcache.hpp"
#include "test_support.hpp"
#include "testing/fake_driver.hpp"
#include "util/epoch.hpp"

namespace kcache {
namespace {

using fakes::FakeDriver;

class EvictionTest : public ::testing::Test {
protected:
    void make_cache(std::size_t max_entries) {
        cache.emplace(test::fake_options(fake, max_entries));
    }

    // Looks up softmax:<cols>, compiling it on a miss.
    Result<KernelHandle> softmax(int cols) {
        return cache->kernel(
            test::softmax_key(cols), [cols] { return test::softmax_source(cols); }, test::kSoftmax);
    }

    std::shared_ptr<FakeDriver> fake = std::make_shared<FakeDriver>();
    std::optional<KernelCache> cache;
};

TEST_F(EvictionTest, CacheStaysWithinMaxEntries) {
    make_cache(4);
    for (int cols = 1; cols <= 10; ++cols) ASSERT_TRUE(softmax(cols).ok());

    EXPECT_LE(cache->size(), 4u);
    EXPECT_EQ(cache->stats().evictions, 6u);
    EXPECT_EQ(fake->loads(), 10);
}

// Each eviction sorts and rebuilds the whole table: done at every insertion beyond a large
// budget, loading N kernels past it cost N times the table (issue 19's scale curve).
TEST_F(EvictionTest, AnEvictionOverALargeBudgetMakesRoomForASixteenthOfIt) {
    make_cache(64);
    for (int cols = 1; cols <= 65; ++cols) ASSERT_TRUE(softmax(cols).ok());
    EXPECT_EQ(cache->stats().evictions, 5u);  // down to 60, four below the budget
    EXPECT_EQ(cache->size(), 60u);

    for (int cols = 66; cols <= 69; ++cols) ASSERT_TRUE(softmax(cols).ok());
    EXPECT_EQ(cache->stats().evictions, 5u);  // room left: no eviction, no sort
    EXPECT_EQ(cache->size(), 64u);
    ASSERT_TRUE(softmax(70).ok());
    EXPECT_EQ(cache->stats().evictions, 10u);
    EXPECT_EQ(cache->size(), 60u);
}

TEST_F(EvictionTest, EvictedLibrariesWithoutHandlesAreUnloaded) {
    make_cache(4);
    for (int cols = 1; cols <= 10; ++cols) ASSERT_TRUE(softmax(cols).ok());
    util::EpochDomain::global().synchronize();

    EXPECT_EQ(fake->unloads(), 6);
    EXPECT_EQ(fake->live_libraries(), 4);
    EXPECT_EQ(cache->stats().loaded_libraries, 4u);
}

TEST_F(EvictionTest, EvictedKeyCompilesAgainOnNextLookup) {
    make_cache(1);
    ASSERT_TRUE(softmax(1).ok());
    ASSERT_TRUE(softmax(2).ok());  // evicts softmax:1

    ASSERT_TRUE(softmax(1).ok());

    EXPECT_EQ(fake->loads(), 3);
}

TEST_F(EvictionTest, RecentlyUsedEntrySurvivesEviction) {
    make_cache(4);
    ASSERT_TRUE(softmax(1).ok());  // A, the oldest insertion
    for (int cols = 2; cols <= 10; ++cols) {
        ASSERT_TRUE(softmax(1).ok());  // touch A
        ASSERT_TRUE(softmax(cols).ok());
    }
    const int loads_before = fake->loads();

    ASSERT_TRUE(softmax(1).ok());

    EXPECT_EQ(fake->loads(), loads_before) << "the most recently used entry was evicted";
    EXPECT_EQ(cache->stats().evictions, 6u);
}

TEST_F(EvictionTest, LeastRecentlyUsedEntryIsEvictedFirst) {
    make_cache(3);
    ASSERT_TRUE(softmax(1).ok());
    ASSERT_TRUE(softmax(2).ok());
    ASSERT_TRUE(softmax(3).ok());
    ASSERT_TRUE(softmax(1).ok());  // 2 is now the least recently used
    ASSERT_TRUE(softmax(4).ok());  // evicts one
    const int loads_before = fake->loads();

    ASSERT_TRUE(softmax(1).ok());
    ASSERT_TRUE(softmax(3).ok());
    ASSERT_TRUE(softmax(4).ok());
    EXPECT_EQ(fake->loads(), loads_before) << "an entry other than the LRU one was evicted";

    ASSERT_TRUE(softmax(2).ok());
    EXPECT_EQ(fake->loads(), loads_before + 1);
}

TEST_F(EvictionTest, EvictedEntryWithLiveHandleStaysLoaded) {
    make_cache(1);
    auto held = softmax(1);
    ASSERT_TRUE(held.ok());

    ASSERT_TRUE(softmax(2).ok());  // evicts softmax:1
    ASSERT_EQ(cache->stats().evictions, 1u);

    EXPECT_EQ(fake->unloads(), 0);
    auto launched = test::launch_softmax(*held);
    EXPECT_TRUE(launched.ok()) << launched.error().describe();
    EXPECT_EQ(fake->use_after_unload(), 0);
    EXPECT_EQ(cache->stats().loaded_libraries, 2u);
}

TEST_F(EvictionTest, EvictedEntryIsUnloadedWhenItsLastHandleGoes) {
    make_cache(1);
    auto result = softmax(1);
    ASSERT_TRUE(result.ok());
    std::optional<KernelHandle> held(std::move(result).value());
    KernelHandle copy = *held;
    ASSERT_TRUE(softmax(2).ok());  // evicts softmax:1
    ASSERT_EQ(fake->unloads(), 0);

    held.reset();
    EXPECT_EQ(fake->unloads(), 0) << "unloaded while a copy of the handle lives";
    copy = KernelHandle();
    util::EpochDomain::global().synchronize();

    EXPECT_EQ(fake->unloads(), 1);
    EXPECT_EQ(fake->live_libraries(), 1);  // softmax:2, still cached
    EXPECT_EQ(fake->use_after_unload(), 0);
}

TEST_F(EvictionTest, EvictionPrefersEntriesNoHandleHolds) {
    make_cache(2);
    auto held = softmax(1);  // the oldest entry, but held
    ASSERT_TRUE(held.ok());
    ASSERT_TRUE(softmax(2).ok());  // newer, not held
    ASSERT_TRUE(softmax(3).ok());  // over budget: one of 1 and 2 must go
    const int loads_before = fake->loads();

    ASSERT_TRUE(softmax(1).ok());

    EXPECT_EQ(fake->loads(), loads_before) << "the held entry was evicted over an unheld one";
    util::EpochDomain::global().synchronize();
    EXPECT_EQ(fake->unloads(), 1);  // softmax:2's library actually went
}

TEST_F(EvictionTest, MaxEntriesZeroIsTakenAsOne) {
    make_cache(0);
    ASSERT_TRUE(softmax(1).ok());
    EXPECT_EQ(cache->size(), 1u);
    ASSERT_TRUE(softmax(1).ok());
    EXPECT_EQ(fake->loads(), 1);
}

TEST_F(EvictionTest, NewEntryIsNotEvictedByItsOwnInsertion) {
    make_cache(1);
    auto held = softmax(1);
    ASSERT_TRUE(held.ok());

    auto fresh = softmax(2);  // both held: the older one goes

    ASSERT_TRUE(fresh.ok());
    ASSERT_TRUE(softmax(2).ok());
    EXPECT_EQ(fake->loads(), 2);
    EXPECT_EQ(cache->size(), 1u);
}

}  // namespace
}  // namespace kcache
