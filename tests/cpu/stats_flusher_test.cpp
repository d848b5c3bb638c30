// SPDX-License-Identifier: Apache-2.0
// StatsFlusher: each count reaches the persistent statistics once, however often and from however
// many threads it flushes, and a periodic flush stays within its interval.
#include "cache/stats_flusher.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "store/persistent_stats.hpp"
#include "test_support.hpp"
#include "util/files.hpp"

namespace kcache::cache {
namespace {

using store::PersistentStats;
using test::TempDir;

// The real file system, with writes failing while `fail_writes` is set.
class FlakyFiles final : public test::ForwardingFiles {
public:
    bool fail_writes = false;
    Result<void> write_atomic(const util::OpenDirectory& base, std::string_view relative,
                              std::string_view bytes, util::Durability durability) override {
        if (fail_writes) return util::io_error("write", base.path_of(relative), ENOSPC);
        return ForwardingFiles::write_atomic(base, relative, bytes, durability);
    }
};

std::uint64_t stored_hits(const PersistentStats& stats) {
    auto read = stats.read();
    EXPECT_TRUE(read.ok());
    return read ? read->hits : 0;
}

TEST(StatsFlusher, TwoFlushesSendOnlyTheGrowth) {
    TempDir dir;
    const auto target = test::stats_at(dir.path());
    CacheStats cumulative;
    StatsFlusher flusher([&] { return cumulative; }, target);
    cumulative.hits = 3;
    cumulative.compiles = 1;
    cumulative.compile_ns = 500;
    ASSERT_TRUE(flusher.flush().ok());
    cumulative.hits = 10;
    cumulative.disk_hits = 2;
    ASSERT_TRUE(flusher.flush().ok());
    auto read = target.read();
    ASSERT_TRUE(read.ok());
    EXPECT_EQ(read->hits, 10u);  // not 13
    EXPECT_EQ(read->compiles, 1u);
    EXPECT_EQ(read->compile_ns, 500u);
    EXPECT_EQ(read->disk_hits, 2u);
}

TEST(StatsFlusher, MaybeFlushWithinTheIntervalWritesNothing) {
    TempDir dir;
    const auto target = test::stats_at(dir.path());
    CacheStats cumulative;
    StatsFlusher flusher([&] { return cumulative; }, target, std::chrono::seconds(1));
    cumulative.hits = 1;
    ASSERT_TRUE(flusher.flush().ok());
    cumulative.hits = 5;
    flusher.maybe_flush();
    EXPECT_EQ(stored_hits(target), 1u);
}

TEST(StatsFlusher, MaybeFlushRightAfterConstructionWritesNothing) {
    TempDir dir;
    const auto target = test::stats_at(dir.path());
    CacheStats cumulative;
    cumulative.misses = 1;
    StatsFlusher flusher([&] { return cumulative; }, target, std::chrono::seconds(1));
    flusher.maybe_flush();
    EXPECT_EQ(target.read()->misses, 0u);
}

TEST(StatsFlusher, MaybeFlushOnceTheIntervalHasPassedWrites) {
    TempDir dir;
    const auto target = test::stats_at(dir.path());
    CacheStats cumulative;
    StatsFlusher flusher([&] { return cumulative; }, target, std::chrono::milliseconds(10));
    cumulative.hits = 4;
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    flusher.maybe_flush();
    EXPECT_EQ(stored_hits(target), 4u);
}

TEST(StatsFlusher, DestructionFlushesWhatIsLeft) {
    TempDir dir;
    const auto target = test::stats_at(dir.path());
    CacheStats cumulative;
    {
        StatsFlusher flusher([&] { return cumulative; }, target);
        cumulative.hits = 2;
        ASSERT_TRUE(flusher.flush().ok());
        cumulative.hits = 9;
    }
    EXPECT_EQ(stored_hits(target), 9u);
}

TEST(StatsFlusher, NothingNewWritesNoFile) {
    TempDir dir;
    const auto target = test::stats_at(dir.path() + "/cache");
    CacheStats cumulative;
    cumulative.entries = 5;  // a gauge, never sent
    cumulative.disk_enabled = true;
    {
        StatsFlusher flusher([&] { return cumulative; }, target);
        ASSERT_TRUE(flusher.flush().ok());
    }
    EXPECT_FALSE(std::filesystem::exists(dir.path() + "/cache/stats"));
}

TEST(StatsFlusher, AFailedFlushKeepsItsGrowthForTheNext) {
    TempDir dir;
    FlakyFiles files;
    const auto target = test::stats_at(dir.path(), files);
    CacheStats cumulative;
    StatsFlusher flusher([&] { return cumulative; }, target);
    cumulative.hits = 3;
    files.fail_writes = true;
    EXPECT_FALSE(flusher.flush().ok());
    EXPECT_EQ(stored_hits(target), 0u);
    files.fail_writes = false;
    cumulative.hits = 5;
    ASSERT_TRUE(flusher.flush().ok());
    EXPECT_EQ(stored_hits(target), 5u);
}

// Each counter of the list reaches the persistent statistics from its own CacheStats field.
TEST(StatsFlusher, CountersOfTakesEachCounterFromItsOwnField) {
    CacheStats stats;
    std::uint64_t value = 1;
#define KCACHE_SET_DISTINCT(name, unit, group, label) stats.name = value++ * 1000 + 7;
    KCACHE_STATS_COUNTERS(KCACHE_SET_DISTINCT)
#undef KCACHE_SET_DISTINCT
    stats.entries = 1;  // gauges are no counters: none of them reaches the file
    stats.loaded_libraries = 2;
    const store::StatsCounters counters = counters_of(stats);
    value = 1;
    for (const store::StatsField& field : store::stats_fields()) {
        EXPECT_EQ(counters.*(field.member), value++ * 1000 + 7) << field.name;
    }
    EXPECT_EQ(counters.zeroed_at, 0u);
}

TEST(StatsFlusher, CountersThatRestartFromZeroCountWhole) {
    const store::StatsCounters before = counters_of([] {
        CacheStats s;
        s.hits = 100;
        s.misses = 4;
        return s;
    }());
    CacheStats now;
    now.hits = 7;  // the source restarted: all 7 are new
    now.misses = 6;
    const store::StatsCounters delta = growth(counters_of(now), before);
    EXPECT_EQ(delta.hits, 7u);
    EXPECT_EQ(delta.misses, 2u);
}

// Many threads on the miss path, each finding a flush due: every count lands exactly once.
TEST(StatsFlusher, ConcurrentMaybeFlushesSendEachCountOnce) {
    TempDir dir;
    const auto target = test::stats_at(dir.path());
    std::atomic<std::uint64_t> misses{0};
    constexpr int kThreads = 8;
    constexpr int kMissesPerThread = 300;
    {
        StatsFlusher flusher(
            [&] {
                CacheStats s;
                s.misses = misses.load();
                return s;
            },
            target, std::chrono::nanoseconds(0));
        std::vector<std::thread> threads;
        threads.reserve(kThreads);
        for (int t = 0; t < kThreads; ++t) {
            threads.emplace_back([&] {
                for (int i = 0; i < kMissesPerThread; ++i) {
                    misses.fetch_add(1);
                    flusher.maybe_flush();
                }
            });
        }
        for (auto& thread : threads) thread.join();
        EXPECT_GT(target.read()->misses, 0u);  // periodic flushes happened before the last one
    }
    EXPECT_EQ(target.read()->misses, std::uint64_t{kThreads} * kMissesPerThread);
}

}  // namespace
}  // namespace kcache::cache
