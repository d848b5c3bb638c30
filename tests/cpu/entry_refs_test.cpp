// An entry's reference counts: the home counter that its first handle uses, the striped block
// that hits by key allocate, and the unload once the entry is retired and nothing holds it.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "cache/entry.hpp"
#include "driver/fake_driver.hpp"
#include "test_support.hpp"
#include "util/epoch.hpp"

namespace kcache::cache {
namespace {

using driver::FakeDriver;

class EntryRefsTest : public ::testing::Test {
protected:
    // A loaded entry, owned by nobody: it frees itself through the epoch domain once retired and
    // released, as a cache's entries do.
    Entry* make_entry() {
        auto library = fake->load_library(test::softmax_source(32));
        EXPECT_TRUE(library.ok());
        return new Entry("softmax:32", 90, 1, util::Fingerprint{}, *library, fake, counters);
    }

    std::shared_ptr<FakeDriver> fake = std::make_shared<FakeDriver>();
    std::shared_ptr<LibraryCounters> counters = std::make_shared<LibraryCounters>();
};

TEST_F(EntryRefsTest, AnEntryCarriesNoStripedCountersUntilItIsHitByKey) {
    // 32 stripes of a cache line each made an entry 2.3 KiB, faulted in for every kernel a new
    // process loads; the block is now allocated by the first hit by key.
    EXPECT_LE(sizeof(Entry), 512u);
}

TEST_F(EntryRefsTest, TheHomeReferenceKeepsARetiredEntryLoadedUntilReleased) {
    Entry* entry = make_entry();
    entry->add_ref(Entry::kHomeStripe);
    entry->retire();
    util::EpochDomain::global().synchronize();
    EXPECT_EQ(fake->unloads(), 0);
    EXPECT_TRUE(entry->referenced());

    entry->release(Entry::kHomeStripe);
    util::EpochDomain::global().synchronize();
    EXPECT_EQ(fake->unloads(), 1);
    EXPECT_EQ(counters->unloaded.load(), 1u);
}

TEST_F(EntryRefsTest, HitsOnStripesAndTheHomeReferenceAllCount) {
    Entry* entry = make_entry();
    entry->add_ref(Entry::kHomeStripe);
    auto first = entry->try_acquire(3);
    auto second = entry->try_acquire(17);
    ASSERT_TRUE(first && second);
    EXPECT_EQ(*first, 3u);
    EXPECT_EQ(*second, 17u);
    entry->add_ref(*first);  // a copy of the first hit's handle

    entry->retire();
    entry->release(Entry::kHomeStripe);
    entry->release(*second);
    entry->release(*first);
    util::EpochDomain::global().synchronize();
    EXPECT_EQ(fake->unloads(), 0) << "one copy still holds stripe 3";

    entry->release(*first);
    util::EpochDomain::global().synchronize();
    EXPECT_EQ(fake->unloads(), 1);
}

TEST_F(EntryRefsTest, AHitOnARetiredEntryFailsAndLeavesNoCount) {
    Entry* entry = make_entry();
    entry->add_ref(Entry::kHomeStripe);
    entry->retire();
    EXPECT_FALSE(entry->try_acquire(5).has_value());
    EXPECT_EQ(fake->unloads(), 0);

    entry->release(Entry::kHomeStripe);
    util::EpochDomain::global().synchronize();
    EXPECT_EQ(fake->unloads(), 1);
}

TEST_F(EntryRefsTest, ConcurrentFirstHitsAndARetireUnloadOnceAndNeverUnderAHolder) {
    // Every round races the block's installation (the first hits) against the retire.
    for (int round = 0; round < 50; ++round) {
        Entry* entry = make_entry();
        entry->add_ref(Entry::kHomeStripe);
        std::atomic<bool> go{false};
        std::atomic<int> unloaded_under_a_holder{0};
        std::vector<std::thread> readers;
        for (std::uint32_t t = 0; t < 4; ++t) {
            readers.emplace_back([&, t] {
                // Pinned throughout, as a probe is while it holds the entry it found: the entry's
                // memory outlives the unload until every reader has unpinned.
                auto guard = util::EpochDomain::global().pin();
                while (!go.load()) {
                }
                for (int i = 0; i < 200; ++i) {
                    auto stripe = entry->try_acquire(t * 7 % util::kStripes);
                    if (!stripe) return;
                    if (fake->live_libraries() != 1) unloaded_under_a_holder.fetch_add(1);
                    entry->release(*stripe);
                }
            });
        }
        go.store(true);
        entry->retire();
        entry->release(Entry::kHomeStripe);
        for (auto& reader : readers) reader.join();
        util::EpochDomain::global().synchronize();
        EXPECT_EQ(unloaded_under_a_holder.load(), 0);
        EXPECT_EQ(fake->unloads(), round + 1);
    }
}

}  // namespace
}  // namespace kcache::cache
