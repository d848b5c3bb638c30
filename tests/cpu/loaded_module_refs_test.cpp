// SPDX-License-Identifier: Apache-2.0
// An entry's reference counts: the home counter that its first handle uses, the striped block
// that hits by key allocate, and the unload once the entry is retired and nothing holds it.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "cache/loaded_module.hpp"
#include "test_support.hpp"
#include "testing/fake_driver.hpp"
#include "util/epoch.hpp"

namespace kcache::cache {
namespace {

using fakes::FakeDriver;

// try_acquire as an optional, for readable tests.
std::optional<std::uint32_t> acquire(LoadedModule* entry, std::uint32_t stripe) {
    const std::uint32_t counted = entry->try_acquire(stripe);
    if (counted == LoadedModule::kNotAcquired) return std::nullopt;
    return counted;
}

class EntryRefsTest : public ::testing::Test {
protected:
    // A loaded entry, owned by nobody: it frees itself through the epoch domain once retired and
    // released, as a cache's entries do.
    LoadedModule* make_entry() {
        auto library = fake->load_module(test::softmax_source(32));
        EXPECT_TRUE(library.ok());
        return new LoadedModule("softmax:32", 90, 1, util::Fingerprint{}, std::nullopt, *library,
                                fake, counters);
    }

    std::shared_ptr<FakeDriver> fake = std::make_shared<FakeDriver>();
    std::shared_ptr<ModuleCounters> counters = std::make_shared<ModuleCounters>();
};

TEST_F(EntryRefsTest, AnEntryCarriesNoStripedCountersUntilItIsHitByKey) {
    // 32 stripes of a cache line each made an entry 2.3 KiB, faulted in for every kernel a new
    // process loads; the block is now allocated by the first hit by key.
    EXPECT_LE(sizeof(LoadedModule), 512u);
}

TEST_F(EntryRefsTest, TheHomeReferenceKeepsARetiredEntryLoadedUntilReleased) {
    LoadedModule* entry = make_entry();
    entry->add_ref(LoadedModule::kHomeStripe);
    entry->retire();
    util::EpochDomain::global().synchronize();
    EXPECT_EQ(fake->unloads(), 0);
    EXPECT_TRUE(entry->referenced());

    entry->release(LoadedModule::kHomeStripe);
    util::EpochDomain::global().synchronize();
    EXPECT_EQ(fake->unloads(), 1);
    EXPECT_EQ(counters->unloaded.load(), 1u);
}

TEST_F(EntryRefsTest, HitsOnStripesAndTheHomeReferenceAllCount) {
    LoadedModule* entry = make_entry();
    entry->add_ref(LoadedModule::kHomeStripe);
    auto first = acquire(entry, 3);
    auto second = acquire(entry, 17);
    ASSERT_TRUE(first && second);
    EXPECT_EQ(*first, 3u);
    EXPECT_EQ(*second, 17u);
    entry->add_ref(*first);  // a copy of the first hit's handle

    entry->retire();
    entry->release(LoadedModule::kHomeStripe);
    entry->release(*second);
    entry->release(*first);
    util::EpochDomain::global().synchronize();
    EXPECT_EQ(fake->unloads(), 0) << "one copy still holds stripe 3";

    entry->release(*first);
    util::EpochDomain::global().synchronize();
    EXPECT_EQ(fake->unloads(), 1);
}

TEST_F(EntryRefsTest, AHitOnARetiredEntryFailsAndLeavesNoCount) {
    LoadedModule* entry = make_entry();
    entry->add_ref(LoadedModule::kHomeStripe);
    entry->retire();
    EXPECT_FALSE(acquire(entry, 5).has_value());
    EXPECT_EQ(fake->unloads(), 0);

    entry->release(LoadedModule::kHomeStripe);
    util::EpochDomain::global().synchronize();
    EXPECT_EQ(fake->unloads(), 1);
}

TEST_F(EntryRefsTest, CopiesAndReleasesAfterTheRetireMoveToHomeAndTheLastOneUnloads) {
    LoadedModule* entry = make_entry();
    std::optional<std::uint32_t> hit;
    {
        auto guard = util::EpochDomain::global().pin();
        hit = acquire(entry, 4);
    }
    ASSERT_TRUE(hit);
    entry->add_ref(*hit);  // a copy made before the retire: on the stripe
    entry->retire();
    entry->add_ref(*hit);  // one made after it: the stripe is collapsed, so on home
    EXPECT_TRUE(entry->referenced());

    entry->release(*hit);
    entry->release(*hit);
    util::EpochDomain::global().synchronize();
    EXPECT_EQ(fake->unloads(), 0) << "one reference on stripe 4 is still held";
    EXPECT_TRUE(entry->referenced());

    entry->release(*hit);
    util::EpochDomain::global().synchronize();
    EXPECT_EQ(fake->unloads(), 1);
    EXPECT_EQ(fake->use_after_unload(), 0);
}

TEST_F(EntryRefsTest, AnEntryNobodyHoldsIsUnloadedByItsRetire) {
    LoadedModule* entry = make_entry();
    {
        auto guard = util::EpochDomain::global().pin();
        auto hit = acquire(entry, 9);
        ASSERT_TRUE(hit);
        entry->release(*hit);
    }
    EXPECT_FALSE(entry->referenced());
    entry->retire();
    EXPECT_EQ(fake->unloads(), 1) << "nothing held it: the retire itself unloads";
    util::EpochDomain::global().synchronize();  // frees it: nothing may touch it after
    EXPECT_EQ(fake->unloads(), 1);
    EXPECT_EQ(counters->unloaded.load(), 1u);
}

TEST_F(EntryRefsTest, HandlesReleasedOnOtherThreadsDuringTheRetireUnloadExactlyOnce) {
    // Each round: threads hold references on their stripes (and copies of them), the entry is
    // retired while they release them, copy and release again; the library must stay loaded
    // while any reference is held, and be unloaded once.
    constexpr int kThreads = 4;
    for (int round = 0; round < 200; ++round) {
        LoadedModule* entry = make_entry();
        std::atomic<int> ready{0};
        std::atomic<bool> go{false};
        std::atomic<int> unloaded_while_held{0};
        std::vector<std::thread> threads;
        threads.reserve(kThreads);
        for (int t = 0; t < kThreads; ++t) {
            threads.emplace_back([&, t] {
                std::optional<std::uint32_t> held;
                {
                    auto guard = util::EpochDomain::global().pin();
                    held = acquire(entry, static_cast<std::uint32_t>(t));
                }
                if (!held) return;
                entry->add_ref(*held);
                ready.fetch_add(1);
                while (!go.load()) {
                }
                for (int i = 0; i < 50; ++i) {
                    entry->add_ref(*held);
                    if (fake->live_libraries() != 1) unloaded_while_held.fetch_add(1);
                    entry->release(*held);
                }
                entry->release(*held);
                if (fake->live_libraries() != 1) unloaded_while_held.fetch_add(1);
                entry->release(*held);
            });
        }
        while (ready.load() < kThreads) {
        }
        go.store(true);
        std::atomic<int> spin{0};
        while (spin.fetch_add(1, std::memory_order_relaxed) < round * 10) {
        }
        entry->retire();
        for (auto& thread : threads) thread.join();
        util::EpochDomain::global().synchronize();
        EXPECT_EQ(unloaded_while_held.load(), 0) << "round " << round;
        EXPECT_EQ(fake->unloads(), round + 1) << "round " << round;
    }
    EXPECT_EQ(fake->use_after_unload(), 0);
}

TEST_F(EntryRefsTest, HitsRacingTheRetireAndTheLastReleasesNeverSeeTheLibraryUnloaded) {
    // Each round: readers race to install the stripe block with their first hits and each keep
    // one reference; then, while they go on hitting, the entry is retired and its home reference
    // and their kept ones are released. The library must be loaded whenever a hit succeeds, and
    // unloaded once at the end.
    constexpr int kReaders = 4;
    long total_hits = 0;
    for (int round = 0; round < 200; ++round) {
        LoadedModule* entry = make_entry();
        entry->add_ref(LoadedModule::kHomeStripe);
        std::atomic<int> holding{0};
        std::atomic<bool> retire_now{false};
        std::atomic<int> unloaded_under_a_holder{0};
        std::atomic<int> hits{0};
        std::vector<std::thread> readers;
        readers.reserve(kReaders);
        for (int t = 0; t < kReaders; ++t) {
            readers.emplace_back([&, t] {
                // Pinned throughout, as a probe is while it holds the entry it found: the entry's
                // memory outlives the unload until every reader has unpinned.
                auto guard = util::EpochDomain::global().pin();
                const auto stripe = static_cast<std::uint32_t>(t * 7) % util::kStripes;
                const auto kept = acquire(entry, stripe);
                if (!kept) return;
                holding.fetch_add(1);
                while (!retire_now.load()) {
                }
                for (int i = 0; i < 100; ++i) {
                    if (i == 10 * t) entry->release(*kept);  // one by one, while others hit
                    auto hit = acquire(entry, stripe);
                    if (!hit) continue;
                    hits.fetch_add(1);
                    if (fake->live_libraries() != 1) unloaded_under_a_holder.fetch_add(1);
                    entry->release(*hit);
                }
            });
        }
        while (holding.load() < kReaders) {
        }
        retire_now.store(true);
        // A delay that grows with the round, so that some rounds' hits come before the retire,
        // some race it, and some come after.
        std::atomic<int> spin{0};
        while (spin.fetch_add(1, std::memory_order_relaxed) < round * 20) {
        }
        entry->retire();
        entry->release(LoadedModule::kHomeStripe);
        for (auto& reader : readers) reader.join();
        util::EpochDomain::global().synchronize();
        EXPECT_EQ(unloaded_under_a_holder.load(), 0) << "round " << round;
        EXPECT_EQ(fake->unloads(), round + 1) << "round " << round;
        total_hits += hits.load();
    }
    EXPECT_GT(total_hits, 0) << "no hit came before a retire";
}

}  // namespace
}  // namespace kcache::cache
