// SPDX-License-Identifier: Apache-2.0
// The persistent statistics of a cache directory: the file format, corruption, zeroing, and exact
// sums under many processes writing and reading at once.
#include "store/persistent_stats.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "test_support.hpp"
#include "util/file_lock.hpp"
#include "util/files.hpp"

namespace kcache::store {
namespace {

using test::TempDir;

constexpr int kProcesses = 8;
constexpr int kAddsPerProcess = 1000;

// Every counter set to a distinct value, so that a field mixed up with another shows.
StatsCounters distinct_counters() {
    StatsCounters c;
    std::uint64_t value = 1;
    for (const StatsField& field : stats_fields()) c.*(field.member) = value++ * 1000 + 7;
    return c;
}

std::string read_text(const std::string& path) {
    auto text = util::read_named_file(path, std::uint64_t{1} << 30);
    return text && *text ? **text : std::string();
}

void write_text(const std::string& path, const std::string& text) {
    ASSERT_TRUE(test::replace_file(path, text));
}

// Starts `kProcesses` children that wait on a pipe, so that they all start together, then run
// `work`; the child's exit status is 0 when `work` returns true.
template <class Work>
std::vector<pid_t> start_children(Work work, int& go_write_end) {
    int go[2];
    EXPECT_EQ(pipe(go), 0);
    std::vector<pid_t> children;
    for (int i = 0; i < kProcesses; ++i) {
        const pid_t pid = fork();
        if (pid == 0) {
            close(go[1]);
            char byte = 0;
            (void)!read(go[0], &byte, 1);  // returns when the parent closes its end
            _exit(work() ? 0 : 1);
        }
        EXPECT_GT(pid, 0);
        children.push_back(pid);
    }
    close(go[0]);
    go_write_end = go[1];
    return children;
}

void expect_children_succeeded(const std::vector<pid_t>& children) {
    for (const pid_t pid : children) {
        int status = 0;
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        ASSERT_TRUE(WIFEXITED(status));
        EXPECT_EQ(WEXITSTATUS(status), 0) << "a child's add failed";
    }
}

// Adds 1 hit and 3 ns of compile time `count` times. The patience is long: these tests are about
// exact sums, not about how fast a lock comes.
bool add_many(const PersistentStats& stats, int count = kAddsPerProcess) {
    StatsCounters one;
    one.hits = 1;
    one.compile_ns = 3;
    for (int i = 0; i < count; ++i) {
        if (!stats.add(one, std::chrono::seconds(60))) return false;
    }
    return true;
}

TEST(PersistentStatsShard, AZeroedAtNoCalendarCanShowIsNoShardOfOurs) {
    const std::string good = "kcache-stats 1\nzeroed_at 1764800000\nhits 3\n";
    ASSERT_TRUE(parse_stats_shard(good).has_value());
    EXPECT_EQ(parse_stats_shard(good)->counters.hits, 3u);
    EXPECT_FALSE(parse_stats_shard("kcache-stats 1\nzeroed_at 99999999999999999\nhits 3\n"));
}

// A shard as kcache wrote it before the counters became one list, in that older order: the
// format is by name, so it reads the same whatever order this version writes.
TEST(PersistentStatsShard, AShardInTheFormerFieldOrderStillParses) {
    const std::string old =
        "kcache-stats 1\nzeroed_at 1764800000\nhits 1\nmisses 2\nwaits 3\nmemory_hits 4\n"
        "compiles 5\ncompile_failures 6\ncompile_ns 7\nevictions 8\nverify_failures 9\n"
        "disk_hits 10\ndisk_misses 11\ndisk_writes 12\ndisk_errors 13\ndisk_corrupt 14\n"
        "disk_evicted 15\ndisk_evicted_bytes 16\ndisk_rejected 17\nprebuilds 18\n"
        "prebuild_compiles 19\nconfig_errors 20\n";
    const auto shard = parse_stats_shard(old);
    ASSERT_TRUE(shard.has_value());
    EXPECT_TRUE(shard->unknown.empty());
    const StatsCounters& c = shard->counters;
    EXPECT_EQ(c.zeroed_at, 1764800000u);
    EXPECT_EQ(c.hits, 1u);
    EXPECT_EQ(c.misses, 2u);
    EXPECT_EQ(c.waits, 3u);
    EXPECT_EQ(c.memory_hits, 4u);
    EXPECT_EQ(c.compiles, 5u);
    EXPECT_EQ(c.compile_failures, 6u);
    EXPECT_EQ(c.compile_ns, 7u);
    EXPECT_EQ(c.evictions, 8u);
    EXPECT_EQ(c.verify_failures, 9u);
    EXPECT_EQ(c.disk_hits, 10u);
    EXPECT_EQ(c.disk_misses, 11u);
    EXPECT_EQ(c.disk_writes, 12u);
    EXPECT_EQ(c.disk_errors, 13u);
    EXPECT_EQ(c.disk_corrupt, 14u);
    EXPECT_EQ(c.disk_evicted, 15u);
    EXPECT_EQ(c.disk_evicted_bytes, 16u);
    EXPECT_EQ(c.disk_rejected, 17u);
    EXPECT_EQ(c.prebuilds, 18u);
    EXPECT_EQ(c.prebuild_compiles, 19u);
    EXPECT_EQ(c.config_errors, 20u);
    // Written back, every name of the old file is there with its value (an older reader's view).
    const std::string again = format_stats_shard(*shard);
    for (std::size_t line = old.find('\n') + 1; line < old.size();) {
        const std::size_t end = old.find('\n', line);
        EXPECT_NE(again.find("\n" + old.substr(line, end - line + 1)), std::string::npos)
            << old.substr(line, end - line);
        line = end + 1;
    }
}

TEST(PersistentStatsShard, EveryCounterOfTheListIsALineOfTheShard) {
    StatsShard shard;
    shard.counters = distinct_counters();
    const std::string text = format_stats_shard(shard);
    for (const StatsField& field : stats_fields()) {
        EXPECT_NE(text.find("\n" + std::string(field.name) + " " +
                            std::to_string(shard.counters.*(field.member)) + "\n"),
                  std::string::npos)
            << field.name;
    }
    EXPECT_EQ(static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')),
              stats_fields().size() + 2);  // the header and zeroed_at
}

TEST(PersistentStatsShard, GroupTotalsSumTheirMembers) {
    const StatsCounters c = distinct_counters();
    EXPECT_EQ(group_total(c, StatsGroup::kLookups), c.hits + c.misses);
    EXPECT_EQ(group_total(c, StatsGroup::kTierLookups),
              c.memory_hits + c.disk_hits + c.disk_misses);
    EXPECT_EQ(group_total(c, StatsGroup::kNone), 0u);
}

TEST(PersistentStats, MissingDirectoryReadsAsZeros) {
    TempDir dir;
    auto stats = test::stats_at(dir.path() + "/never-created");
    auto read = stats.read();
    ASSERT_TRUE(read.ok()) << read.error().describe();
    EXPECT_EQ(*read, StatsCounters{});
}

TEST(PersistentStats, AddThenReadRoundTripsEveryCounter) {
    TempDir dir;
    auto stats = test::stats_at(dir.path());
    const StatsCounters written = distinct_counters();
    ASSERT_TRUE(stats.add(written).ok());
    auto read = stats.read();
    ASSERT_TRUE(read.ok()) << read.error().describe();
    EXPECT_EQ(*read, written);
}

TEST(PersistentStats, AddsAccumulate) {
    TempDir dir;
    auto stats = test::stats_at(dir.path());
    StatsCounters a;
    a.hits = 5;
    a.disk_writes = 2;
    StatsCounters b;
    b.hits = 7;
    b.misses = 1;
    ASSERT_TRUE(stats.add(a).ok());
    ASSERT_TRUE(stats.add(b).ok());
    auto read = stats.read();
    ASSERT_TRUE(read.ok());
    EXPECT_EQ(read->hits, 12u);
    EXPECT_EQ(read->misses, 1u);
    EXPECT_EQ(read->disk_writes, 2u);
}

TEST(PersistentStats, ReadSumsEveryShard) {
    TempDir dir;
    auto stats = test::stats_at(dir.path());
    StatsCounters one;
    one.compiles = 1;
    for (unsigned shard = 0; shard < PersistentStats::kShards; ++shard) {
        ASSERT_TRUE(stats.on_shard(shard).add(one).ok());
    }
    auto read = stats.read();
    ASSERT_TRUE(read.ok());
    EXPECT_EQ(read->compiles, PersistentStats::kShards);
}

TEST(PersistentStats, ShardFileIsReadableTextWithAVersionHeader) {
    TempDir dir;
    auto stats = test::stats_at(dir.path()).on_shard(3);
    StatsCounters c;
    c.disk_hits = 42;
    ASSERT_TRUE(stats.add(c).ok());
    const std::string text = read_text(stats.shard_path(3));
    EXPECT_EQ(stats.shard_path(3), dir.path() + "/stats/3");
    EXPECT_EQ(text.rfind("kcache-stats 1\n", 0), 0u) << text;
    EXPECT_NE(text.find("\ndisk_hits 42\n"), std::string::npos) << text;
    EXPECT_NE(text.find("\nhits 0\n"), std::string::npos) << text;
}

TEST(PersistentStats, UnknownNamesAreIgnoredAndKeptOnRewrite) {
    TempDir dir;
    auto stats = test::stats_at(dir.path()).on_shard(0);
    // As a newer kcache might write it: a later version and a counter this one does not know.
    write_text(stats.shard_path(0), "kcache-stats 2\nhits 4\nremote_hits 9\n");
    auto read = stats.read();
    ASSERT_TRUE(read.ok());
    EXPECT_EQ(read->hits, 4u);
    StatsCounters one;
    one.hits = 1;
    ASSERT_TRUE(stats.add(one).ok());
    EXPECT_EQ(stats.read()->hits, 5u);
    EXPECT_NE(read_text(stats.shard_path(0)).find("\nremote_hits 9\n"), std::string::npos);
}

TEST(PersistentStats, CorruptFileReadsAsZerosWithALogLine) {
    TempDir dir;
    test::LogToFile log(dir.path() + "/log.txt");
    auto stats = test::stats_at(dir.path()).on_shard(5);
    ASSERT_TRUE(stats.on_shard(6).add(distinct_counters()).ok());  // a healthy shard beside it
    write_text(stats.shard_path(5), "kcache-stats 1\nhits 12\x01garbage");
    auto read = stats.read();
    ASSERT_TRUE(read.ok()) << read.error().describe();
    EXPECT_EQ(*read, distinct_counters());  // the corrupt shard adds nothing
    EXPECT_NE(log.text().find("stats/5 is corrupt"), std::string::npos) << log.text();
}

TEST(PersistentStats, FileCutShortIsCorrupt) {
    TempDir dir;
    auto stats = test::stats_at(dir.path()).on_shard(0);
    write_text(stats.shard_path(0), "kcache-stats 1\nhits 12");  // no final newline
    EXPECT_EQ(stats.read()->hits, 0u);
    write_text(stats.shard_path(0), "hits 12\n");  // no header
    EXPECT_EQ(stats.read()->hits, 0u);
}

TEST(PersistentStats, CorruptFileIsRewrittenByTheNextAdd) {
    TempDir dir;
    auto stats = test::stats_at(dir.path()).on_shard(5);
    write_text(stats.shard_path(5),
               "\x7f"
               "ELF not a stats file");
    StatsCounters c;
    c.misses = 3;
    ASSERT_TRUE(stats.add(c).ok());
    auto read = stats.read();
    ASSERT_TRUE(read.ok());
    EXPECT_EQ(*read, c);
    EXPECT_EQ(read_text(stats.shard_path(5)).rfind("kcache-stats 1\n", 0), 0u);
}

TEST(PersistentStats, ZeroThenReadIsZerosAndKeepsZeroedAt) {
    TempDir dir;
    auto stats = test::stats_at(dir.path());
    for (unsigned shard = 0; shard < PersistentStats::kShards; shard += 5) {
        ASSERT_TRUE(stats.on_shard(shard).add(distinct_counters()).ok());
    }
    const auto before =
        static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                       std::chrono::system_clock::now().time_since_epoch())
                                       .count());
    ASSERT_TRUE(stats.zero().ok());
    auto read = stats.read();
    ASSERT_TRUE(read.ok());
    EXPECT_GE(read->zeroed_at, before);
    EXPECT_LE(read->zeroed_at, before + 60);
    StatsCounters expected;
    expected.zeroed_at = read->zeroed_at;
    EXPECT_EQ(*read, expected);

    // Counting starts again from zero, and the time of zeroing stays.
    StatsCounters one;
    one.hits = 1;
    ASSERT_TRUE(stats.add(one).ok());
    read = stats.read();
    EXPECT_EQ(read->hits, 1u);
    EXPECT_EQ(read->zeroed_at, expected.zeroed_at);
}

TEST(PersistentStats, AddGivesUpOnAHeldLockAndAddsNothing) {
    TempDir dir;
    auto stats = test::stats_at(dir.path()).on_shard(2);
    StatsCounters one;
    one.hits = 1;
    ASSERT_TRUE(stats.add(one).ok());  // creates the folder
    auto held = util::FileLock::acquire(stats.shard_path(2) + ".lock", std::chrono::seconds(1));
    ASSERT_TRUE(held.has_value());
    auto added = stats.add(one, std::chrono::milliseconds(20));
    ASSERT_FALSE(added.ok());
    EXPECT_EQ(added.error().code(), Errc::kIoError);
    EXPECT_EQ(stats.read()->hits, 1u);
}

TEST(PersistentStats, EightProcessesAddingConcurrentlySumExactly) {
    TempDir dir;
    const auto stats = test::stats_at(dir.path());
    int go = -1;
    auto children = start_children([&] { return add_many(stats); }, go);
    close(go);
    expect_children_succeeded(children);
    auto read = stats.read();
    ASSERT_TRUE(read.ok());
    EXPECT_EQ(read->hits, std::uint64_t{kProcesses} * kAddsPerProcess);
    EXPECT_EQ(read->compile_ns, std::uint64_t{3} * kProcesses * kAddsPerProcess);
}

// All on one file and one lock: the pid-picked shards above may not collide at all. Fewer adds:
// they queue on the lock one fsync at a time.
TEST(PersistentStats, EightProcessesOnOneShardSumExactly) {
    TempDir dir;
    const auto stats = test::stats_at(dir.path()).on_shard(7);
    constexpr int kAdds = 100;
    int go = -1;
    auto children = start_children([&] { return add_many(stats, kAdds); }, go);
    close(go);
    expect_children_succeeded(children);
    auto read = stats.read();
    ASSERT_TRUE(read.ok());
    EXPECT_EQ(read->hits, std::uint64_t{kProcesses} * kAdds);
}

TEST(PersistentStats, ReaderConcurrentWithWritersNeverSeesAFailedParse) {
    TempDir dir;
    test::LogToFile log(dir.path() + "/log.txt");
    const auto stats = test::stats_at(dir.path()).on_shard(1);
    // Fewer adds than above: what matters here is how many reads overlap a rename, and the
    // reader's loop already competes with the writers for the CPUs.
    constexpr int kAdds = 100;
    int go = -1;
    auto children = start_children([&] { return add_many(stats, kAdds); }, go);
    close(go);
    // Every shard only grows while nobody zeroes, so a torn or half-parsed read would show as a
    // drop (a corrupt file counts as zeros) or as a log line.
    std::uint64_t last = 0;
    int reads = 0;
    const std::uint64_t total = std::uint64_t{kProcesses} * kAdds;
    // A child that fails would leave the total short forever; its status is checked below.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
    while (last < total && std::chrono::steady_clock::now() < deadline) {
        auto read = stats.read();
        ASSERT_TRUE(read.ok()) << read.error().describe();
        ASSERT_GE(read->hits, last) << "after " << reads << " reads";
        ASSERT_EQ(read->compile_ns, 3 * read->hits);
        last = read->hits;
        ++reads;
    }
    expect_children_succeeded(children);
    EXPECT_EQ(last, total);
    EXPECT_GT(reads, 10);
    EXPECT_EQ(log.text().find("corrupt"), std::string::npos) << log.text();
}

}  // namespace
}  // namespace kcache::store
