// SPDX-License-Identifier: Apache-2.0
// Keeping the disk tier within its budgets: least recently used entries go first, by the mtime
// that a hit refreshes; stale temporaries and unused lock files are swept; one process cleans at
// a time; nothing outside kcache's own entry folders is touched. Ages are set with utimensat, so
// no test sleeps.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "store/directory_sample.hpp"
#include "store/disk_cleaner.hpp"
#include "store/disk_store.hpp"
#include "test_support.hpp"
#include "util/file_lock.hpp"
#include "util/files.hpp"

namespace kcache::store {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::system_clock;
using test::TempDir;

// Sets a file's mtime to `age` before now.
void set_age(const std::string& path, Clock::duration age) {
    const auto since_epoch = (Clock::now() - age).time_since_epoch();
    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(since_epoch);
    timespec times[2] = {{0, UTIME_OMIT}, {0, 0}};
    times[1].tv_sec = seconds.count();
    times[1].tv_nsec =
        std::chrono::duration_cast<std::chrono::nanoseconds>(since_epoch - seconds).count();
    ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW), 0) << path;
}

Clock::duration age_of(const std::string& path) {
    struct stat info {};
    EXPECT_EQ(lstat(path.c_str(), &info), 0) << path;
    const auto modified = Clock::time_point(std::chrono::duration_cast<Clock::duration>(
        std::chrono::seconds(info.st_mtim.tv_sec) +
        std::chrono::nanoseconds(info.st_mtim.tv_nsec)));
    return Clock::now() - modified;
}

// A file of `size` bytes, its folder created, last modified `age` ago.
void make_file(const std::string& path, std::size_t size, Clock::duration age) {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path, std::ios::binary) << std::string(size, 'x');
    set_age(path, age);
}

// The i-th made-up entry, spread over two folders as fingerprints are.
std::string entry_path(const std::string& dir, unsigned i) {
    char name[64];
    std::snprintf(name, sizeof name, "/%02x/%030x.kc", i % 2 == 0 ? 0x01u : 0xabu, i);
    return dir + name;
}

// `count` entries of `size` bytes; entry 0 is the oldest (count hours old), the last the newest.
void make_entries(const std::string& dir, unsigned count, std::size_t size) {
    for (unsigned i = 0; i < count; ++i) {
        make_file(entry_path(dir, i), size, std::chrono::hours(count - i));
    }
}

std::vector<bool> which_exist(const std::string& dir, unsigned count) {
    std::vector<bool> out;
    for (unsigned i = 0; i < count; ++i) out.push_back(fs::exists(entry_path(dir, i)));
    return out;
}

Result<CleanupReport> clean(const std::string& dir, const CleanupRequest& request) {
    return clean_directory(*test::cache_directory(dir), request);
}

CleanupRequest budget(std::uint64_t max_bytes, std::uint64_t max_files) {
    CleanupRequest request;
    request.max_bytes = max_bytes;
    request.max_files = max_files;
    return request;
}

TEST(DiskCleaner, BudgetInBytesKeepsNewestEntries) {
    TempDir dir;
    make_entries(dir.path(), 10, 1000);
    // 10000 bytes against 8000: down to 90% of 8000 = 7200, so the three oldest go.
    auto report = clean(dir.path(), budget(8000, 0));
    ASSERT_TRUE(report.ok()) << report.error().describe();
    EXPECT_TRUE(report->ran);
    EXPECT_EQ(report->files_before, 10u);
    EXPECT_EQ(report->bytes_before, 10000u);
    EXPECT_EQ(report->entries_removed, 3u);
    EXPECT_EQ(report->bytes_removed, 3000u);
    EXPECT_EQ(report->files_after, 7u);
    EXPECT_EQ(report->bytes_after, 7000u);
    EXPECT_EQ(which_exist(dir.path(), 10),
              std::vector<bool>({false, false, false, true, true, true, true, true, true, true}));
}

TEST(DiskCleaner, BudgetInFilesKeepsNewestEntries) {
    TempDir dir;
    make_entries(dir.path(), 10, 100);
    // 10 files against 5: down to 90% of 5, rounded down, = 4.
    auto report = clean(dir.path(), budget(0, 5));
    ASSERT_TRUE(report.ok()) << report.error().describe();
    EXPECT_EQ(report->entries_removed, 6u);
    EXPECT_EQ(report->files_after, 4u);
    EXPECT_EQ(which_exist(dir.path(), 10), std::vector<bool>({false, false, false, false, false,
                                                              false, true, true, true, true}));
}

TEST(DiskCleaner, AtItsBudgetTheDirectoryIsLeftAlone) {
    TempDir dir;
    make_entries(dir.path(), 10, 1000);
    // Exactly at both budgets: the low-water mark applies only once a budget is exceeded.
    auto report = clean(dir.path(), budget(10000, 10));
    ASSERT_TRUE(report.ok()) << report.error().describe();
    EXPECT_EQ(report->entries_removed, 0u);
    EXPECT_EQ(which_exist(dir.path(), 10), std::vector<bool>(10, true));
}

TEST(DiskCleaner, StaleTempFilesAreSweptFreshOnesKept) {
    TempDir dir;
    make_entries(dir.path(), 1, 100);
    const std::string entry = entry_path(dir.path(), 0);
    // As util::Files::write_atomic names them; a host name may have dots in it.
    const std::string stale = entry + ".tmp.build-7.example.com.4242.987654321";
    const std::string fresh = entry + ".tmp.build-7.example.com.4243.123456789";
    make_file(stale, 50, 2h);
    make_file(fresh, 50, 5min);
    auto report = clean(dir.path(), budget(0, 0));
    ASSERT_TRUE(report.ok()) << report.error().describe();
    EXPECT_EQ(report->temps_swept, 1u);
    EXPECT_FALSE(fs::exists(stale));
    EXPECT_TRUE(fs::exists(fresh));
    EXPECT_TRUE(fs::exists(entry));
    EXPECT_EQ(report->files_before, 1u);  // temporaries are not entries
    EXPECT_EQ(report->bytes_before, 100u);
}

TEST(DiskCleaner, OrphanLockFilesRemovedHeldOnesKept) {
    TempDir dir;
    make_entries(dir.path(), 1, 100);
    const std::string beside_entry = entry_path(dir.path(), 0) + ".lock";
    const std::string orphan = entry_path(dir.path(), 1) + ".lock";
    const std::string compiling = entry_path(dir.path(), 2) + ".lock";
    make_file(beside_entry, 0, 1h);
    make_file(orphan, 0, 1h);
    make_file(compiling, 0, 1h);
    auto held = util::FileLock::acquire(compiling, 0ms);
    ASSERT_TRUE(held.has_value());

    auto report = clean(dir.path(), budget(0, 0));
    ASSERT_TRUE(report.ok()) << report.error().describe();
    EXPECT_EQ(report->locks_removed, 1u);
    EXPECT_FALSE(fs::exists(orphan));
    EXPECT_TRUE(fs::exists(beside_entry));
    EXPECT_TRUE(fs::exists(compiling));
}

TEST(DiskCleaner, AnEvictedEntrysLockFileGoesWithIt) {
    TempDir dir;
    make_entries(dir.path(), 2, 100);
    const std::string old_lock = entry_path(dir.path(), 0) + ".lock";
    const std::string new_lock = entry_path(dir.path(), 1) + ".lock";
    make_file(old_lock, 0, 1min);
    make_file(new_lock, 0, 1min);
    CleanupRequest request;
    request.evict_older_than = 90min;  // entry 0 is two hours old, entry 1 one hour
    auto report = clean(dir.path(), request);
    ASSERT_TRUE(report.ok()) << report.error().describe();
    EXPECT_EQ(report->entries_removed, 1u);
    EXPECT_EQ(report->locks_removed, 1u);
    EXPECT_FALSE(fs::exists(old_lock));
    EXPECT_TRUE(fs::exists(new_lock));
}

TEST(DiskCleaner, SecondCleanerSkipsWhileOneHoldsTheLock) {
    TempDir dir;
    make_entries(dir.path(), 4, 100);
    {
        auto other_cleaner = util::FileLock::acquire(dir.path() + "/" + kCleanupLockName, 0ms);
        ASSERT_TRUE(other_cleaner.has_value());
        const auto start = std::chrono::steady_clock::now();
        auto skipped = clean(dir.path(), budget(0, 2));
        ASSERT_TRUE(skipped.ok()) << skipped.error().describe();
        EXPECT_FALSE(skipped->ran);
        EXPECT_EQ(skipped->entries_removed, 0u);
        EXPECT_EQ(which_exist(dir.path(), 4), std::vector<bool>(4, true));
        // Never waits for the holder (a generous bound: no poll loop would get under it).
        EXPECT_LT(std::chrono::steady_clock::now() - start, 500ms);
    }
    auto report = clean(dir.path(), budget(0, 2));
    ASSERT_TRUE(report.ok()) << report.error().describe();
    EXPECT_TRUE(report->ran);
    EXPECT_EQ(report->entries_removed, 3u);
}

TEST(DiskCleaner, EvictOlderThanRemovesOnlyOldEntries) {
    TempDir dir;
    const std::string a = entry_path(dir.path(), 0), b = entry_path(dir.path(), 1),
                      c = entry_path(dir.path(), 2), d = entry_path(dir.path(), 3);
    make_file(a, 100, 3h);
    make_file(b, 100, 2h);
    make_file(c, 100, 10min);
    make_file(d, 100, 1min);
    CleanupRequest request;  // no budgets: age alone decides
    request.evict_older_than = std::chrono::hours(1);
    auto report = clean(dir.path(), request);
    ASSERT_TRUE(report.ok()) << report.error().describe();
    EXPECT_EQ(report->entries_removed, 2u);
    EXPECT_FALSE(fs::exists(a));
    EXPECT_FALSE(fs::exists(b));
    EXPECT_TRUE(fs::exists(c));
    EXPECT_TRUE(fs::exists(d));
}

TEST(DiskCleaner, ForeignFilesAndFoldersUntouched) {
    TempDir dir;
    TempDir outside;
    const std::string& root = dir.path();
    make_entries(root, 1, 100);  // kcache's own, to be evicted
    const std::vector<std::string> foreign = {
        root + "/kcache.conf",
        root + "/statistics",
        root + "/keys/0123456789abcdef0123456789abcd.kc",  // not a two-hex-digit folder
        root + "/AB/0123456789abcdef0123456789abcd.kc",    // upper case is not ours
        root + "/abc/0123456789abcdef0123456789abcd.kc",
        root + "/0g/0123456789abcdef0123456789abcd.kc",
        root + "/01/README",
        root + "/01/notes.kc",
        root + "/01/ABCDEF.kc",
        root + "/01/notes.kc.lock",
        root + "/01/notes.kc.tmp.host.1.2",
        root + "/01/0123.kc.lock.bak",
    };
    for (const std::string& path : foreign) make_file(path, 100, 10h);
    // Plain files where kcache's folders would be, and links that lead out of the cache.
    make_file(root + "/cd", 100, 10h);
    make_file(root + "/stats", 100, 10h);
    const std::string victim = outside.path() + "/0123456789abcdef0123456789abcd.kc";
    make_file(victim, 100, 10h);
    fs::create_directory_symlink(outside.path(), root + "/ef");
    fs::create_symlink(victim, root + "/01/fedcba9876543210fedcba98765432.kc");

    CleanupRequest request = budget(1, 1);
    request.evict_older_than = std::chrono::seconds(1);
    auto report = clean(root, request);
    ASSERT_TRUE(report.ok()) << report.error().describe();
    EXPECT_EQ(report->files_before, 1u);
    EXPECT_EQ(report->entries_removed, 1u);
    EXPECT_EQ(report->temps_swept + report->locks_removed, 0u);
    EXPECT_FALSE(fs::exists(entry_path(root, 0)));
    for (const std::string& path : foreign) EXPECT_TRUE(fs::exists(path)) << path;
    // What stood at kcache's own names is removed, never followed: the links themselves go, and
    // what they led to stays.
    EXPECT_EQ(report->strays_removed, 4u);
    EXPECT_FALSE(fs::exists(fs::symlink_status(root + "/cd")));
    EXPECT_FALSE(fs::exists(fs::symlink_status(root + "/stats")));
    EXPECT_FALSE(fs::exists(fs::symlink_status(root + "/ef")));
    EXPECT_FALSE(fs::exists(fs::symlink_status(root + "/01/fedcba9876543210fedcba98765432.kc")));
    EXPECT_TRUE(fs::exists(victim));
    EXPECT_EQ(std::distance(fs::directory_iterator(outside.path()), fs::directory_iterator()), 1);
}

// --- Through the disk store ---

// Forwards everything to the real file system; tests override what they watch or break.
using test::ForwardingFiles;

std::unique_ptr<DiskStore> open_store(const std::string& dir, std::uint64_t max_bytes,
                                      std::uint64_t max_files, util::Files* files = nullptr) {
    DiskOptions options;
    options.directory = dir;
    options.max_bytes = max_bytes;
    options.max_files = max_files;
    options.files = files;
    auto store = DiskStore::open(options);
    EXPECT_TRUE(store.ok()) << store.error().describe();
    return store.ok() ? std::move(*store) : nullptr;
}

util::Fingerprint print(std::uint64_t i) {
    return {0x0123456789abcdefULL + (i << 56), 0xfedcba9876543210ULL + i};
}

// An entry that zstd cannot shrink, so that its size on disk is predictable.
Artifact sample(std::size_t payload_bytes, std::uint64_t seed) {
    std::mt19937_64 random(seed);
    Artifact entry;
    entry.key.arch = "sm_90";
    entry.key.source_kind = "ptx";
    entry.key.caller_key = "gelu:" + std::to_string(seed);
    entry.payload.resize(payload_bytes);
    for (char& c : entry.payload) c = static_cast<char>(random());
    return entry;
}

struct Usage {
    std::uint64_t files = 0;
    std::uint64_t bytes = 0;
};

Usage usage_of(const std::string& dir) {
    Usage usage;
    for (const auto& item : fs::recursive_directory_iterator(dir)) {
        if (item.is_regular_file() && item.path().extension() == ".kc") {
            ++usage.files;
            usage.bytes += item.file_size();
        }
    }
    return usage;
}

TEST(DiskStoreCleanup, HitRefreshesRecencySoHotEntrySurvives) {
    TempDir dir;
    auto store = open_store(dir.path(), 0, 0);
    for (std::uint64_t i = 0; i < 4; ++i) {
        ASSERT_TRUE(store->put(print(i), sample(100, i)).ok());
        set_age(store->path_of(print(i)), std::chrono::hours(4 - i));
    }
    ASSERT_NE(store->get(print(0)), nullptr);
    EXPECT_LT(age_of(store->path_of(print(0))), 1min);
    // Four entries against three: down to two. Without the hit, entry 0 would be the first to go.
    auto report = store->cleanup(budget(0, 3));
    ASSERT_TRUE(report.ok()) << report.error().describe();
    EXPECT_EQ(report->entries_removed, 2u);
    EXPECT_TRUE(fs::exists(store->path_of(print(0))));
    EXPECT_FALSE(fs::exists(store->path_of(print(1))));
    EXPECT_FALSE(fs::exists(store->path_of(print(2))));
    EXPECT_TRUE(fs::exists(store->path_of(print(3))));
}

TEST(DiskStoreCleanup, AFreshStampIsNotRewrittenOnAHit) {
    // A warm start reads many entries: restamping each on every hit would be a metadata write
    // per kernel for nothing, eviction works on a coarser clock.
    TempDir dir;
    auto store = open_store(dir.path(), 0, 0);
    ASSERT_TRUE(store->put(print(0), sample(100, 0)).ok());
    set_age(store->path_of(print(0)), std::chrono::minutes(2));
    ASSERT_NE(store->get(print(0)), nullptr);
    EXPECT_GT(age_of(store->path_of(print(0))), 1min);
}

TEST(DiskStoreCleanup, DryRunRemovesNothing) {
    TempDir dir;
    make_entries(dir.path(), 10, 1000);
    make_file(entry_path(dir.path(), 0) + ".tmp.host.1.2", 10, 2h);
    make_file(entry_path(dir.path(), 20) + ".lock", 0, 2h);
    auto store = open_store(dir.path(), 0, 0);
    CleanupRequest request = budget(8000, 0);
    request.dry_run = true;
    auto report = store->cleanup(request);
    ASSERT_TRUE(report.ok()) << report.error().describe();
    EXPECT_TRUE(report->dry_run);
    // What a real run would do...
    EXPECT_EQ(report->entries_removed, 3u);
    EXPECT_EQ(report->bytes_after, 7000u);
    EXPECT_EQ(report->temps_swept, 1u);
    EXPECT_EQ(report->locks_removed, 1u);
    // ...and nothing done.
    EXPECT_EQ(which_exist(dir.path(), 10), std::vector<bool>(10, true));
    EXPECT_TRUE(fs::exists(entry_path(dir.path(), 0) + ".tmp.host.1.2"));
    EXPECT_TRUE(fs::exists(entry_path(dir.path(), 20) + ".lock"));
    EXPECT_EQ(store->stats().evicted, 0u);
}

TEST(DiskStoreCleanup, PutTriggersCleanupWhenOverBudget) {
    TempDir dir;
    make_entries(dir.path(), 10, 1000);  // left by earlier processes, hours old
    auto store = open_store(dir.path(), 8000, 0);
    ASSERT_TRUE(store->put(print(100), sample(100, 100)).ok());
    EXPECT_GE(store->stats().evicted, 3u);
    EXPECT_EQ(store->stats().evicted_bytes, 1000 * store->stats().evicted);
    EXPECT_FALSE(fs::exists(entry_path(dir.path(), 0)));
    EXPECT_TRUE(fs::exists(store->path_of(print(100))));
    EXPECT_LE(usage_of(dir.path()).bytes, 8000u);
}

TEST(DiskCleaner, OldKeyIndexRecordsGoAndFreshOnesStay) {
    TempDir dir;
    const std::string old_record = dir.path() + "/keys/ab/0123";
    const std::string fresh_record = dir.path() + "/keys/ab/4567";
    const std::string dead_temp = dir.path() + "/keys/ab/x.tmp.host.1.2";
    make_file(old_record, 40, std::chrono::hours(24 * 31));
    make_file(fresh_record, 40, std::chrono::hours(24));
    make_file(dead_temp, 40, std::chrono::hours(2));
    CleanupRequest request;
    request.dry_run = true;
    auto dry = clean_directory(*test::cache_directory(dir.path()), request);
    ASSERT_TRUE(dry.ok()) << dry.error().describe();
    EXPECT_EQ(dry->index_records_removed, 2u);
    EXPECT_TRUE(fs::exists(old_record));
    auto report = clean_directory(*test::cache_directory(dir.path()), CleanupRequest{});
    ASSERT_TRUE(report.ok());
    EXPECT_EQ(report->index_records_removed, 2u);
    EXPECT_FALSE(fs::exists(old_record));
    EXPECT_FALSE(fs::exists(dead_temp));
    EXPECT_TRUE(fs::exists(fresh_record));
}

TEST(DiskStoreCleanup, ADeferredPutCleansOnlyWhenThePendingCleanupRuns) {
    // The pipeline writes while holding an entry's compile lock and cleans after releasing it.
    TempDir dir;
    make_entries(dir.path(), 10, 1000);
    auto store = open_store(dir.path(), 8000, 0);
    ASSERT_TRUE(store->put(print(100), sample(100, 100), DiskStore::Cleaning::kDeferred).ok());
    EXPECT_EQ(store->stats().evicted, 0u);
    EXPECT_TRUE(fs::exists(entry_path(dir.path(), 0)));
    store->run_pending_cleanup();
    EXPECT_GE(store->stats().evicted, 3u);
    EXPECT_LE(usage_of(dir.path()).bytes, 8000u);
    store->run_pending_cleanup();  // nothing pending: no second pass
    EXPECT_GE(store->stats().evicted, 3u);
}

TEST(DiskStoreCleanup, WritesKeepTheDirectoryWithinBudget) {
    TempDir dir;
    const std::size_t entry_bytes = encode(sample(1000, 0)).size();
    // Room for 20 entries, scanned every second write at least: the directory must not overshoot
    // between scans either.
    const std::uint64_t max_bytes = 20 * entry_bytes;
    auto store = open_store(dir.path(), max_bytes, 0);
    for (std::uint64_t i = 0; i < 100; ++i) {
        ASSERT_TRUE(store->put(print(i), sample(1000, i)).ok());
        ASSERT_LE(usage_of(dir.path()).bytes, max_bytes) << "after write " << i;
    }
    EXPECT_GE(store->stats().evicted, 80u);
    EXPECT_EQ(store->stats().errors, 0u);
}

// Counts scans: each lists the cache directory once.
class CountingFiles final : public ForwardingFiles {
public:
    explicit CountingFiles(std::string directory) : directory_(std::move(directory)) {}
    Result<std::vector<std::string>> list_directory(const util::OpenDirectory& base,
                                                    std::string_view relative) override {
        if (base.path_of(relative) == directory_) ++scans;
        return ForwardingFiles::list_directory(base, relative);
    }
    int scans = 0;

private:
    std::string directory_;
};

TEST(DiskStoreCleanup, ScansAtFirstWriteThenAfterATenthOfTheBudget) {
    TempDir dir;
    CountingFiles files(dir.path());
    auto store = open_store(dir.path(), 0, 20, &files);  // a scan every 2 files written
    std::vector<int> scans;
    for (std::uint64_t i = 0; i < 5; ++i) {
        ASSERT_TRUE(store->put(print(i), sample(10, i)).ok());
        scans.push_back(files.scans);
    }
    EXPECT_EQ(scans, std::vector<int>({1, 1, 2, 2, 3}));
}

TEST(DiskStoreCleanup, FirstWriteSweepsStaleTemporariesEvenWithoutBudgets) {
    TempDir dir;
    const std::string stale = entry_path(dir.path(), 0) + ".tmp.host.1.2";
    make_file(stale, 10, 2h);
    auto store = open_store(dir.path(), 0, 0);
    ASSERT_TRUE(store->put(print(1), sample(10, 1)).ok());
    EXPECT_FALSE(fs::exists(stale));
}

// `per_folder` made-up entries of `size` bytes in each of the 256 entry folders, an hour old.
void make_large_directory(const std::string& dir, unsigned per_folder, std::size_t size) {
    for (unsigned folder = 0; folder < 256; ++folder) {
        for (unsigned i = 0; i < per_folder; ++i) {
            char name[64];
            std::snprintf(name, sizeof name, "/%02x/%030x.kc", folder, i);
            make_file(dir + name, size, 1h);
        }
    }
}

TEST(DirectorySample, ScalesItsFoldersUpToTheWholeDirectory) {
    TempDir dir;
    make_large_directory(dir.path(), 3, 100);
    make_file(dir.path() + "/fe/abc.kc.tmp.host.1.2", 5000, 0h);  // no entry: not counted
    make_file(dir.path() + "/ff/notes.txt", 5000, 0h);
    auto opened = CacheDirectory::open(dir.path(), {}, util::real_files());
    ASSERT_TRUE(opened.ok()) << opened.error().describe();
    // Folders fe, ff, 00 and 01: the run wraps.
    auto sample = sample_directory(**opened, 0xfe, 4);
    ASSERT_TRUE(sample.ok()) << sample.error().describe();
    EXPECT_EQ(sample->sampled_files, 12u);
    EXPECT_EQ(sample->estimated_files, 768u);
    EXPECT_EQ(sample->estimated_bytes, 76800u);
    EXPECT_FALSE(sample->last_cleanup.has_value());  // no cleaner was ever here

    // Missing folders are empty; the cleanup lock's stamp is the last cleanup.
    fs::remove_all(dir.path() + "/00");
    fs::remove_all(dir.path() + "/01");
    make_file(dir.path() + "/" + kCleanupLockName, 0, 5min);
    sample = sample_directory(**opened, 0xfe, 4);
    ASSERT_TRUE(sample.ok());
    EXPECT_EQ(sample->sampled_files, 6u);
    EXPECT_EQ(sample->estimated_files, 384u);
    ASSERT_TRUE(sample->last_cleanup.has_value());
    EXPECT_NEAR(std::chrono::duration<double>(Clock::now() - *sample->last_cleanup).count(), 300,
                5);
}

TEST(DirectorySample, AFullScanIsDueUnlessALargeSampleFollowsARecentCleanupWithRoomLeft) {
    const auto now = Clock::now();
    DirectorySample large;
    large.sampled_files = kTrustedSampleFiles;
    large.estimated_files = 4096;
    large.estimated_bytes = 4096 * 1000;
    large.last_cleanup = now - 10min;
    EXPECT_FALSE(full_scan_due(large, 0, 0, now));
    EXPECT_FALSE(full_scan_due(large, 10'000'000, 10'000, now));  // well within both budgets

    DirectorySample small = large;
    small.sampled_files = kTrustedSampleFiles - 1;  // a small directory: a pass is cheap
    EXPECT_TRUE(full_scan_due(small, 0, 0, now));
    DirectorySample never = large;
    never.last_cleanup.reset();
    EXPECT_TRUE(full_scan_due(never, 0, 0, now));
    DirectorySample stale = large;
    stale.last_cleanup = now - kStaleTemporaryAge;  // dead writers' temporaries may wait
    EXPECT_TRUE(full_scan_due(stale, 0, 0, now));
    DirectorySample future = large;
    future.last_cleanup = now + 1h;  // a stamp from the future proves nothing
    EXPECT_TRUE(full_scan_due(future, 0, 0, now));
    // Within a fifth of a budget, the estimate's error could hide an overshoot.
    EXPECT_TRUE(full_scan_due(large, 0, 5120, now));
    EXPECT_FALSE(full_scan_due(large, 0, 5130, now));
    EXPECT_TRUE(full_scan_due(large, 5'120'000, 0, now));
    EXPECT_FALSE(full_scan_due(large, 5'130'000, 0, now));
}

// A directory of 4,096 entries (16 a folder), cleaned a minute ago, and a stale temporary that
// only a full pass would sweep.
struct LargeDirectory {
    TempDir dir;
    std::string stale = dir.path() + "/7f/0123.kc.tmp.host.1.2";
    LargeDirectory() {
        make_large_directory(dir.path(), 16, 100);
        make_file(stale, 10, 2h);
        make_file(dir.path() + "/" + kCleanupLockName, 0, 1min);
    }
};

TEST(DiskStoreCleanup, AFirstWriteIntoALargeRecentlyCleanedDirectoryScansNothing) {
    LargeDirectory large;
    auto store = open_store(large.dir.path(), 0, 0);
    ASSERT_TRUE(store->put(print(1), sample(10, 1)).ok());
    EXPECT_EQ(store->stats().scans, 0u);
    EXPECT_EQ(store->stats().sampled, 1u);
    EXPECT_TRUE(fs::exists(large.stale));  // left to the next pass
}

TEST(DiskStoreCleanup, AFirstWriteScansALargeDirectoryThatNoCleanerVisitedLately) {
    LargeDirectory large;
    set_age(large.dir.path() + "/" + kCleanupLockName, kStaleTemporaryAge + 1min);
    auto store = open_store(large.dir.path(), 0, 0);
    ASSERT_TRUE(store->put(print(1), sample(10, 1)).ok());
    EXPECT_EQ(store->stats().scans, 1u);
    EXPECT_EQ(store->stats().sampled, 0u);
    EXPECT_FALSE(fs::exists(large.stale));
}

TEST(DiskStoreCleanup, AFirstWriteScansALargeDirectoryNearItsBudget) {
    LargeDirectory large;
    auto store = open_store(large.dir.path(), 0, 4500);  // 4,097 entries: over 80% of it
    ASSERT_TRUE(store->put(print(1), sample(10, 1)).ok());
    EXPECT_EQ(store->stats().scans, 1u);
    EXPECT_EQ(usage_of(large.dir.path()).files, 4097u);  // within budget: nothing evicted
    // Trusting the sample, a later write still counts on its estimate against the budget.
    auto within = open_store(large.dir.path(), 0, 6000);
    ASSERT_TRUE(within->put(print(2), sample(10, 2)).ok());
    EXPECT_EQ(within->stats().scans, 0u);
}

// Entries cannot be removed, or the directory cannot even be listed.
class StuckFiles final : public ForwardingFiles {
public:
    bool fail_list = false;
    int listings = 0;
    Result<void> remove(const util::OpenDirectory& base, std::string_view relative) override {
        if (relative.ends_with(".kc"))
            return util::io_error("remove", base.path_of(relative), EACCES);
        return ForwardingFiles::remove(base, relative);
    }
    Result<std::vector<std::string>> list_directory(const util::OpenDirectory& base,
                                                    std::string_view relative) override {
        ++listings;
        if (fail_list) return util::io_error("list", base.path_of(relative), EIO);
        return ForwardingFiles::list_directory(base, relative);
    }
};

TEST(DiskStoreCleanup, EntriesThatCannotBeRemovedAreCountedErrorsNotAFailedPut) {
    TempDir dir;
    make_entries(dir.path(), 10, 100);
    StuckFiles files;
    auto store = open_store(dir.path(), 0, 5, &files);
    EXPECT_TRUE(store->put(print(1), sample(10, 1)).ok());
    EXPECT_GE(store->stats().errors, 1u);
    EXPECT_EQ(store->stats().evicted, 0u);
    EXPECT_EQ(which_exist(dir.path(), 10), std::vector<bool>(10, true));
}

TEST(DiskStoreCleanup, ACleanupThatCannotRemoveDoesNotMakeEveryWriteScan) {
    TempDir dir;
    make_entries(dir.path(), 60, 10);
    StuckFiles files;
    auto store = open_store(dir.path(), 0, 50, &files);  // a scan every 5 files written
    ASSERT_TRUE(store->put(print(0), sample(10, 0)).ok());
    const int after_first_scan = files.listings;
    EXPECT_GT(after_first_scan, 1);  // the directory and its entry folders
    for (std::uint64_t i = 1; i < 4; ++i) ASSERT_TRUE(store->put(print(i), sample(10, i)).ok());
    // Still over budget, but the stuck pass's figures must not make each write scan again.
    EXPECT_EQ(files.listings, after_first_scan);
}

TEST(DiskStoreCleanup, AnUnlistableDirectoryIsACountedErrorNotAFailedPut) {
    TempDir dir;
    StuckFiles files;
    files.fail_list = true;
    auto store = open_store(dir.path(), 0, 5, &files);
    EXPECT_TRUE(store->put(print(1), sample(10, 1)).ok());
    EXPECT_EQ(store->stats().errors, 1u);
    EXPECT_EQ(store->stats().writes, 1u);
    auto report = store->cleanup(budget(0, 5));
    ASSERT_FALSE(report.ok());
    EXPECT_EQ(report.error().code(), Errc::kIoError);
}

TEST(DiskStoreCleanup, DefaultsAreFourGiBAndNoFileLimit) {
    const DiskOptions options;
    EXPECT_EQ(options.max_bytes, std::uint64_t{4} * 1024 * 1024 * 1024);
    EXPECT_EQ(options.max_files, 0u);
}

}  // namespace
}  // namespace kcache::store

namespace kcache::util {
namespace {

using namespace std::chrono_literals;

TEST(FileLock, TryAcquireGivesUpAtOnceWhileAnotherHoldsIt) {
    test::TempDir dir;
    const std::string path = dir.path() + "/cleanup.lock";
    auto first = FileLock::try_acquire(path);
    ASSERT_TRUE(first.ok() && first->has_value());
    auto second = FileLock::try_acquire(path);
    ASSERT_TRUE(second.ok());
    EXPECT_FALSE(second->has_value());
    first->reset();
    auto third = FileLock::try_acquire(path);
    ASSERT_TRUE(third.ok());
    EXPECT_TRUE(third->has_value());
}

TEST(FileLock, TryAcquireSaysWhenTheLockFileCannotBeOpened) {
    auto lock = FileLock::try_acquire("/nonexistent-dir/cleanup.lock");
    ASSERT_FALSE(lock.ok());
    EXPECT_EQ(lock.error().code(), Errc::kIoError);
}

}  // namespace
}  // namespace kcache::util
