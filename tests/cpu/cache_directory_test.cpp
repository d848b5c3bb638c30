// SPDX-License-Identifier: Apache-2.0
// The cache directory's acceptance (owner, mode, links, read-only mode) and the stores reached
// through it: what a hostile or careless directory can no longer make kcache do. Cases that need
// permissions to matter run in a child process as `nobody` (root bypasses them).
#include "store/cache_directory.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "store/directory_sample.hpp"
#include "store/disk_catalog.hpp"
#include "store/disk_cleaner.hpp"
#include "store/disk_store.hpp"
#include "test_support.hpp"
#include "util/log.hpp"

namespace kcache::store {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

constexpr uid_t kNobody = 65534;

// Runs `check` in a child process as `nobody`; its result is the child's. Skips where this
// process cannot become nobody (not root).
void as_nobody(const std::function<bool()>& check) {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to become nobody";
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        if (setgid(kNobody) != 0 || setuid(kNobody) != 0) _exit(3);
        _exit(check() ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "the check failed as nobody (3: could not become nobody)";
}

using test::sample;
const util::Fingerprint kPrint{0x0123456789abcdefULL, 0xfedcba9876543210ULL};

TEST(CacheDirectory, ARelativePathIsHeldAsAbsolute) {
    TempDir dir;
    const auto before = fs::current_path();
    fs::current_path(dir.path());
    auto opened = CacheDirectory::open("cache", DirectoryPolicy{});
    fs::current_path(before);
    ASSERT_TRUE(opened.ok()) << opened.error().describe();
    EXPECT_EQ((*opened)->path(), dir.path() + "/cache");
}

TEST(CacheDirectory, ItsOwnPrivateDirectoryIsAcceptedAndAMissingOneMade) {
    TempDir dir;
    auto made = CacheDirectory::open(dir.path() + "/a/b", DirectoryPolicy{});
    ASSERT_TRUE(made.ok()) << made.error().describe();
    struct stat info {};
    ASSERT_EQ(stat((dir.path() + "/a/b").c_str(), &info), 0);
    EXPECT_EQ(info.st_mode & 0777, 0700u);
    DirectoryPolicy no_make;
    no_make.create = false;
    EXPECT_FALSE(CacheDirectory::open(dir.path() + "/c", no_make).ok());
    EXPECT_FALSE(fs::exists(dir.path() + "/c"));
}

TEST(CacheDirectory, AGroupOrWorldWritableOneIsRefusedUnlessAllowed) {
    TempDir dir;
    ASSERT_EQ(chmod(dir.path().c_str(), 0770), 0);
    auto refused = CacheDirectory::open(dir.path(), DirectoryPolicy{});
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.error().message().find("group- or world-writable"), std::string::npos);
    DirectoryPolicy shared;
    shared.allow_shared = true;
    EXPECT_TRUE(CacheDirectory::open(dir.path(), shared).ok());
}

TEST(CacheDirectory, ALinkTheUserSetIsFollowedAndTheDirectoryBehindItChecked) {
    TempDir dir;
    fs::create_directories(dir.path() + "/big/kcache");
    ASSERT_EQ(chmod((dir.path() + "/big/kcache").c_str(), 0700), 0);
    fs::create_directory_symlink(dir.path() + "/big/kcache", dir.path() + "/link");
    auto opened = CacheDirectory::open(dir.path() + "/link", DirectoryPolicy{});
    ASSERT_TRUE(opened.ok()) << opened.error().describe();
    ASSERT_TRUE((*opened)->write_atomic("ab/x", "bytes").ok());
    EXPECT_TRUE(fs::exists(dir.path() + "/big/kcache/ab/x"));
    // The directory behind the link is held to the same rules.
    ASSERT_EQ(chmod((dir.path() + "/big/kcache").c_str(), 0777), 0);
    EXPECT_FALSE(CacheDirectory::open(dir.path() + "/link", DirectoryPolicy{}).ok());
}

TEST(CacheDirectory, ALinkTheUserSetLeadingToALinkAnotherUserOwnsIsRefused) {
    TempDir dir;
    // The user's ~/.cache/kcache -> /scratch/kcache; the scratch purged, and someone else has
    // made /scratch/kcache a link into the user's home.
    fs::create_directories(dir.path() + "/home/.ssh");
    ASSERT_EQ(chmod((dir.path() + "/home/.ssh").c_str(), 0700), 0);
    fs::create_directories(dir.path() + "/scratch");
    fs::create_directory_symlink(dir.path() + "/home/.ssh", dir.path() + "/scratch/kcache");
    fs::create_directory_symlink(dir.path() + "/scratch/kcache", dir.path() + "/home/cache");
    if (lchown((dir.path() + "/scratch/kcache").c_str(), 12345, 12345) != 0) {
        GTEST_SKIP() << "no lchown";
    }
    auto refused = CacheDirectory::open(dir.path() + "/home/cache", DirectoryPolicy{});
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.error().message().find("owned by another user"), std::string::npos)
        << refused.error().message();
    // The same chain, every link the user's own, is followed.
    ASSERT_EQ(lchown((dir.path() + "/scratch/kcache").c_str(), geteuid(), getegid()), 0);
    EXPECT_TRUE(CacheDirectory::open(dir.path() + "/home/cache", DirectoryPolicy{}).ok());
}

TEST(CacheDirectory, ALinkAnotherUserOwnsIsRefused) {
    TempDir dir;
    fs::create_directories(dir.path() + "/target");
    ASSERT_EQ(chmod((dir.path() + "/target").c_str(), 0700), 0);
    fs::create_directory_symlink(dir.path() + "/target", dir.path() + "/link");
    if (lchown((dir.path() + "/link").c_str(), 12345, 12345) != 0) GTEST_SKIP() << "no lchown";
    auto refused = CacheDirectory::open(dir.path() + "/link", DirectoryPolicy{});
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.error().message().find("symbolic link owned by another user"),
              std::string::npos)
        << refused.error().message();
}

TEST(CacheDirectory, RootsCacheIsRefusedToAnotherUserExceptReadOnlyAndThenNothingIsWritten) {
    TempDir dir;
    // Filled by root, readable by all, writable by root alone: a cache baked into an image.
    ASSERT_EQ(chmod(dir.path().c_str(), 0755), 0);
    {
        auto store = DiskStore::over(test::cache_directory(dir.path()), 0, 0);
        ASSERT_TRUE(store->put(kPrint, sample()).ok());
    }
    for (const auto& item : fs::recursive_directory_iterator(dir.path())) {
        fs::permissions(item.path(),
                        fs::perms::others_read | fs::perms::group_read |
                            (item.is_directory() ? fs::perms::others_exec | fs::perms::group_exec
                                                 : fs::perms::none),
                        fs::perm_options::add);
    }
    const auto entry = dir.path() + "/" + DiskStore::relative_path_of(kPrint);
    const timespec long_ago[2] = {{1000000000, 0}, {1000000000, 0}};
    ASSERT_EQ(utimensat(AT_FDCWD, entry.c_str(), long_ago, 0), 0);
    const auto files_now = [&] {
        std::vector<std::string> files;
        for (const auto& item : fs::recursive_directory_iterator(dir.path())) {
            files.push_back(item.path().string());
        }
        std::sort(files.begin(), files.end());
        return files;
    };
    const std::vector<std::string> before = files_now();
    as_nobody([&] {
        auto refused = CacheDirectory::open(dir.path(), DirectoryPolicy{});
        if (refused.ok() || refused.error().message().find("KCACHE_READ_ONLY") == std::string::npos)
            return false;
        DiskOptions options;
        options.directory = dir.path();
        options.read_only = true;
        auto store = DiskStore::open(options);
        if (!store) return false;
        auto hit = (*store)->get(kPrint);
        if (hit == nullptr || hit->owned() != sample()) return false;
        // Writing nothing: no entry, no stamp, no cleanup, no lock.
        if ((*store)->put(util::Fingerprint{1, 2}, sample()).ok()) return false;
        auto cleaned = (*store)->cleanup((*store)->budget_request());
        return cleaned.ok() && !cleaned->ran && !(*store)->lock(kPrint, std::chrono::seconds(1));
    });
    struct stat info {};
    ASSERT_EQ(stat(entry.c_str(), &info), 0);
    EXPECT_EQ(info.st_mtim.tv_sec, 1000000000) << "a read-only hit stamped the entry";
    EXPECT_EQ(files_now(), before);
}

TEST(CacheDirectory, AnEntryOthersWroteOrMayRewriteIsAMissNotALoad) {
    TempDir dir;
    auto store = DiskStore::over(test::cache_directory(dir.path()), 0, 0);
    ASSERT_TRUE(store->put(kPrint, sample()).ok());
    const std::string entry = dir.path() + "/" + DiskStore::relative_path_of(kPrint);
    ASSERT_EQ(chmod(entry.c_str(), 0666), 0);  // anyone may rewrite it in place
    EXPECT_EQ(store->get(kPrint), nullptr);
    EXPECT_EQ(store->stats().corrupt, 1u);
    ASSERT_TRUE(store->put(kPrint, sample()).ok());
    ASSERT_NE(store->get(kPrint), nullptr);
    if (chown(entry.c_str(), 12345, 12345) != 0) GTEST_SKIP() << "cannot chown here";
    EXPECT_EQ(store->get(kPrint), nullptr) << "another user's file in the user's directory";
    // A shared directory, allowed from outside it, trusts its writers.
    DiskOptions shared;
    shared.directory = dir.path();
    shared.allow_shared_directory = true;
    ASSERT_TRUE(store->put(kPrint, sample()).ok());
    ASSERT_EQ(chmod(entry.c_str(), 0664), 0);
    EXPECT_NE((*DiskStore::open(shared))->get(kPrint), nullptr);
}

TEST(CacheDirectory, AnotherUsersDirectoryIsRefusedBeforeAnythingInItIsRead) {
    TempDir dir;
    ASSERT_EQ(chmod(dir.path().c_str(), 0755), 0);
    test::write_file(dir.path() + "/kcache.conf", "max_files = 1\n");
    as_nobody([&] {
        DirectoryPolicy policy;
        policy.create = false;
        auto refused = CacheDirectory::open(dir.path(), policy);
        return !refused.ok() && refused.error().message().find("another user") != std::string::npos;
    });
}

TEST(CacheDirectory, AFifoAtAnEntrysNameIsAMissRemovedNotAHang) {
    TempDir dir;
    auto store = DiskStore::over(test::cache_directory(dir.path()), 0, 0);
    const std::string entry = dir.path() + "/" + DiskStore::relative_path_of(kPrint);
    fs::create_directories(fs::path(entry).parent_path());
    ASSERT_EQ(mkfifo(entry.c_str(), 0600), 0);
    EXPECT_EQ(store->get(kPrint), nullptr);  // a blocking open would wait here forever
    EXPECT_EQ(store->stats().corrupt, 1u);
    EXPECT_FALSE(fs::exists(fs::symlink_status(entry)));
    ASSERT_TRUE(store->put(kPrint, sample()).ok());
    EXPECT_NE(store->get(kPrint), nullptr);
}

TEST(CacheDirectory, AFolderOrALinkAtAnEntrysNameIsRemovedAndTheNameWorksAgain) {
    TempDir dir;
    TempDir outside;
    test::write_file(outside.path() + "/victim", "keep me");
    auto store = DiskStore::over(test::cache_directory(dir.path()), 0, 0);
    const std::string entry = dir.path() + "/" + DiskStore::relative_path_of(kPrint);
    fs::create_directories(entry + "/inside");
    EXPECT_EQ(store->get(kPrint), nullptr);
    EXPECT_TRUE(fs::exists(entry)) << "a lookup removes no trees";
    EXPECT_EQ(store->stats().errors, 0u);
    auto cleaned = store->cleanup(store->budget_request());
    ASSERT_TRUE(cleaned.ok());
    EXPECT_EQ(cleaned->strays_removed, 1u);
    EXPECT_FALSE(fs::exists(entry));
    fs::create_symlink(outside.path() + "/victim", entry);
    EXPECT_EQ(store->get(kPrint), nullptr);
    EXPECT_FALSE(fs::exists(fs::symlink_status(entry)));
    EXPECT_EQ(**util::read_named_file(outside.path() + "/victim", 100), "keep me");
    EXPECT_EQ(store->stats().corrupt, 2u);
}

TEST(CacheDirectory, ALinkedEntryFolderLeadsNoWriteOrRemovalOutside) {
    TempDir dir;
    TempDir outside;
    const std::string folder = DiskStore::relative_path_of(kPrint).substr(0, 2);
    const std::string name = DiskStore::relative_path_of(kPrint).substr(3);
    test::write_file(outside.path() + "/" + name, "not an entry");
    const timespec long_ago[2] = {{1000000000, 0}, {1000000000, 0}};
    ASSERT_EQ(utimensat(AT_FDCWD, (outside.path() + "/" + name).c_str(), long_ago, 0), 0);
    fs::create_directory_symlink(outside.path(), dir.path() + "/" + folder);
    auto directory = test::cache_directory(dir.path());
    auto store = DiskStore::over(directory, 0, 0);
    EXPECT_EQ(store->get(kPrint), nullptr);
    EXPECT_FALSE(store->put(kPrint, sample()).ok());
    CleanupRequest everything;
    everything.evict_older_than = std::chrono::seconds(0);
    everything.all_temporaries = true;
    auto report = clean_directory(*directory, everything);
    ASSERT_TRUE(report.ok()) << report.error().describe();
    EXPECT_EQ(report->entries_removed, 0u);
    EXPECT_EQ(report->strays_removed, 1u);  // the link itself
    EXPECT_EQ(**util::read_named_file(outside.path() + "/" + name, 100), "not an entry");
    EXPECT_EQ(std::distance(fs::directory_iterator(outside.path()), fs::directory_iterator()), 1);
    // Healed: the name is a folder of kcache's again.
    ASSERT_TRUE(store->put(kPrint, sample()).ok());
    EXPECT_NE(store->get(kPrint), nullptr);
}

TEST(CacheDirectory, AFifoOrAFolderAtTheCleanupLocksNameStopsNoCleanup) {
    TempDir dir;
    auto directory = test::cache_directory(dir.path());
    for (const bool fifo : {true, false}) {
        const std::string lock = dir.path() + "/" + kCleanupLockName;
        if (fifo) {
            ASSERT_EQ(mkfifo(lock.c_str(), 0600), 0);
        } else {
            fs::create_directories(lock + "/inside");
        }
        auto report = clean_directory(*directory, CleanupRequest{});
        ASSERT_TRUE(report.ok()) << report.error().describe();
        EXPECT_TRUE(report->ran);
        EXPECT_EQ(report->strays_removed, 1u);
        EXPECT_TRUE(fs::is_regular_file(lock));
        fs::remove(lock);
    }
}

// A folder held for a pass takes a name in it, nothing that climbs out or walks on; a read-only
// directory's folder removes nothing.
TEST(CacheDirectory, AHeldFolderTakesOnlyANameInItAndKeepsTheDirectorysPolicy) {
    TempDir dir;
    auto store = DiskStore::over(test::cache_directory(dir.path()), 0, 0);
    ASSERT_TRUE(store->put(kPrint, sample()).ok());
    const std::string relative = DiskStore::relative_path_of(kPrint);
    const std::string folder_name = relative.substr(0, 2), name = relative.substr(3);
    auto directory = test::cache_directory(dir.path());
    auto folder = directory->folder(folder_name);
    ASSERT_TRUE(folder.ok()) << folder.error().describe();
    EXPECT_EQ(folder->relative_of(name), relative);
    auto status = folder->status(name);
    ASSERT_TRUE(status.ok() && status->has_value());
    EXPECT_EQ((*status)->kind, util::FileKind::kRegular);
    for (const std::string& bad :
         std::vector<std::string>{"", ".", "..", "../" + relative, folder_name + "/" + name}) {
        auto refused = folder->status(bad);
        ASSERT_FALSE(refused.ok()) << "'" << bad << "'";
        EXPECT_EQ(refused.error().code(), Errc::kInvalidArgument);
        EXPECT_EQ(folder->remove(bad).error().code(), Errc::kInvalidArgument);
        EXPECT_FALSE(folder->read(bad, kMaxEntryBytes).ok());
    }
    for (const std::string& bad : std::vector<std::string>{"", "..", "/tmp", "ab/"}) {
        auto refused = directory->folder(bad);
        ASSERT_FALSE(refused.ok()) << "'" << bad << "'";
        EXPECT_EQ(refused.error().code(), Errc::kInvalidArgument);
    }
    // Reads are held to the directory's writers, as its own are.
    const std::string path = dir.path() + "/" + relative;
    ASSERT_EQ(chmod(path.c_str(), 0666), 0);
    EXPECT_FALSE(folder->read(name, kMaxEntryBytes).ok()) << "an entry anyone may rewrite";
    ASSERT_EQ(chmod(path.c_str(), 0600), 0);
    DirectoryPolicy read_only;
    read_only.read_only = true;
    auto reader = CacheDirectory::open(dir.path(), read_only);
    ASSERT_TRUE(reader.ok()) << reader.error().describe();
    auto reader_folder = (*reader)->folder(folder_name);
    ASSERT_TRUE(reader_folder.ok());
    EXPECT_TRUE(reader_folder->read(name, kMaxEntryBytes).ok());
    EXPECT_FALSE(reader_folder->remove(name).ok());
    EXPECT_TRUE(fs::exists(dir.path() + "/" + relative));
    ASSERT_TRUE(folder->remove(name).ok());
    EXPECT_FALSE(fs::exists(dir.path() + "/" + relative));
}

TEST(CacheDirectory, AnEntryFolderThatIsALinkIsNotHeld) {
    TempDir dir, elsewhere;
    auto directory = test::cache_directory(dir.path());
    fs::create_symlink(elsewhere.path(), dir.path() + "/ab");
    auto folder = directory->folder("ab");
    ASSERT_FALSE(folder.ok()) << "a link followed to " << elsewhere.path();
    EXPECT_NE(folder.error().message().find(dir.path() + "/ab"), std::string::npos)
        << folder.error().message();
}

// Counts the calls on a path below a folder of the directory ("ab/cdef….kc": the system walks
// from the top for each) and the folders held.
class WalkCounter final : public test::ForwardingFiles {
public:
    int walks = 0;
    int folders_held = 0;
    Result<std::optional<util::FileStatus>> status(const util::OpenDirectory& base,
                                                   std::string_view relative) override {
        count(relative);
        return ForwardingFiles::status(base, relative);
    }
    Result<void> remove(const util::OpenDirectory& base, std::string_view relative) override {
        count(relative);
        return ForwardingFiles::remove(base, relative);
    }
    Result<std::optional<std::string>> read(const util::OpenDirectory& base,
                                            std::string_view relative, std::uint64_t max_bytes,
                                            std::chrono::seconds stamp_after,
                                            const util::Writers* writers) override {
        count(relative);
        return ForwardingFiles::read(base, relative, max_bytes, stamp_after, writers);
    }
    Result<util::OpenDirectory> open_below(const util::OpenDirectory& base,
                                           std::string_view relative) override {
        ++folders_held;
        return ForwardingFiles::open_below(base, relative);
    }

private:
    void count(std::string_view relative) {
        if (relative.find('/') != std::string_view::npos) ++walks;
    }
};

// At 100,000 entries the cleaner's scan and removals, its sweep of the key index, a first
// write's sample, `kcache -s` and `kcache ls` spent most of their system calls opening and
// closing each file's folder again: a pass holds each folder once and asks one call a file.
TEST(CacheDirectory, PassesOverTheEntriesHoldEachFolderOnceRatherThanWalkingToEachFile) {
    TempDir dir;
    constexpr int kEntries = 24;
    {
        auto store = DiskStore::over(test::cache_directory(dir.path()), 0, 0);
        for (int i = 0; i < kEntries; ++i) {
            // Two folders: the fingerprint's first byte is its first hex pair.
            const std::uint64_t high = (i % 2 == 0 ? 0x01ULL : 0xabULL) << 56;
            ASSERT_TRUE(
                store->put(util::Fingerprint{high | static_cast<std::uint64_t>(i), 7}, sample())
                    .ok());
        }
    }
    // Key-index records a year old, which the cleanup sweeps.
    for (const char* record : {"keys/01/0a1b", "keys/01/0a1c", "keys/cd/0a1d"}) {
        const std::string path = dir.path() + "/" + record;
        fs::create_directories(fs::path(path).parent_path());
        std::ofstream(path) << "record";
        fs::last_write_time(path, fs::file_time_type::clock::now() - std::chrono::hours(24 * 365));
    }
    WalkCounter files;
    auto directory = test::cache_directory(dir.path(), files);

    auto sampled = sample_directory(*directory, 0, 256);
    ASSERT_TRUE(sampled.ok()) << sampled.error().describe();
    EXPECT_EQ(sampled->sampled_files, static_cast<std::uint64_t>(kEntries));

    auto size = measure_directory(*directory);
    ASSERT_TRUE(size.ok()) << size.error().describe();
    EXPECT_EQ(size->entries, static_cast<std::uint64_t>(kEntries));
    auto listed = list_entries(*directory);
    ASSERT_TRUE(listed.ok()) << listed.error().describe();
    ASSERT_EQ(listed->size(), static_cast<std::size_t>(kEntries));
    for (const CatalogEntry& entry : *listed) {
        EXPECT_TRUE(entry.problem.empty()) << entry.path << ": " << entry.problem;
        EXPECT_EQ(entry.key.caller_key, "gelu:16");
    }
    CleanupRequest request;
    request.max_files = kEntries / 2;
    auto cleaned = clean_directory(*directory, request);
    ASSERT_TRUE(cleaned.ok()) << cleaned.error().describe();
    EXPECT_GE(cleaned->entries_removed, static_cast<std::uint64_t>(kEntries / 2));
    EXPECT_EQ(cleaned->errors, 0u);
    EXPECT_EQ(cleaned->index_records_removed, 3u);
    std::uint64_t left = 0;
    for (const auto& item : fs::recursive_directory_iterator(dir.path())) {
        left += item.path().extension() == ".kc" ? 1 : 0;
    }
    EXPECT_EQ(left, kEntries - cleaned->entries_removed) << "removals reported, not made";
    EXPECT_FALSE(fs::exists(dir.path() + "/keys/01/0a1b"));

    EXPECT_EQ(files.walks, 0) << "a file reached by a walk from the top";
    // Each of the two entry folders once a pass (the sample, -s, ls, and the cleaner's scan and
    // removals), the directory itself for the cleanup lock, the two key-index folders once.
    EXPECT_LE(files.folders_held, 5 * 2 + 1 + 2);
}

// Removes the folder `doomed` just before it is held for the `nth` time: a folder gone between a
// pass's listing and its use of it (another cleaner, a user's rm -rf).
class VanishingFolder final : public test::ForwardingFiles {
public:
    VanishingFolder(std::string doomed, int nth) : doomed_(std::move(doomed)), nth_(nth) {}
    Result<util::OpenDirectory> open_below(const util::OpenDirectory& base,
                                           std::string_view relative) override {
        if (relative == doomed_ && ++seen_ == nth_) fs::remove_all(base.path_of(relative));
        return ForwardingFiles::open_below(base, relative);
    }

private:
    std::string doomed_;
    int nth_;
    int seen_ = 0;
};

// Entries in the folders 01 and ab (`per_folder` each), made through the disk tier.
void put_in_two_folders(const std::string& dir, int per_folder) {
    auto store = DiskStore::over(test::cache_directory(dir), 0, 0);
    for (int i = 0; i < 2 * per_folder; ++i) {
        const std::uint64_t high = (i % 2 == 0 ? 0x01ULL : 0xabULL) << 56;
        ASSERT_TRUE(
            store->put(util::Fingerprint{high | static_cast<std::uint64_t>(i), 7}, sample()).ok());
    }
}

// What a pass chose to remove from a folder that is gone by then is removed, not an error each.
TEST(CacheDirectory, ACleanupWhoseFolderVanishedBeforeItsRemovalsCountsThemRemoved) {
    TempDir dir;
    put_in_two_folders(dir.path(), 4);
    VanishingFolder files("01", 2);  // the scan holds it first, the removals next
    auto directory = test::cache_directory(dir.path(), files);
    CleanupRequest request;
    request.all_entries = true;
    auto cleaned = clean_directory(*directory, request);
    ASSERT_TRUE(cleaned.ok()) << cleaned.error().describe();
    EXPECT_EQ(cleaned->errors, 0u);
    EXPECT_EQ(cleaned->entries_removed, 8u);
    EXPECT_EQ(cleaned->files_after, 0u);
}

TEST(CacheDirectory, AnEntryWhoseFolderVanishedWhileListedSaysSo) {
    TempDir dir;
    put_in_two_folders(dir.path(), 2);
    VanishingFolder files("01", 1);
    auto listed = list_entries(*test::cache_directory(dir.path(), files));
    ASSERT_TRUE(listed.ok()) << listed.error().describe();
    ASSERT_EQ(listed->size(), 4u);
    for (const CatalogEntry& entry : *listed) {
        const bool gone = entry.fingerprint.starts_with("01");
        EXPECT_EQ(entry.problem, gone ? "vanished while listed" : "") << entry.path;
    }
}

TEST(CacheDirectory, AClearTakesEveryEntryWhateverItsStamp) {
    TempDir dir;
    auto store = DiskStore::over(test::cache_directory(dir.path()), 0, 0);
    ASSERT_TRUE(store->put(kPrint, sample()).ok());
    const std::string entry = dir.path() + "/" + DiskStore::relative_path_of(kPrint);
    // Beyond what a nanosecond clock can count, too: held to its range, never wrapped.
    for (const time_t when : {time_t{2208988800}, time_t{32503680000}}) {  // 2040, 3000
        ASSERT_TRUE(store->put(kPrint, sample()).ok());
        const timespec future[2] = {{when, 0}, {when, 0}};
        ASSERT_EQ(utimensat(AT_FDCWD, entry.c_str(), future, 0), 0);
        CleanupRequest clear;
        clear.all_entries = true;
        auto report = clean_directory(*store->cache_directory(), clear);
        ASSERT_TRUE(report.ok());
        EXPECT_EQ(report->entries_removed, 1u);
        EXPECT_FALSE(fs::exists(entry));
    }
}

TEST(CacheDirectory, LeftoverTemporariesAreCountedAndClearedByAClear) {
    TempDir dir;
    auto directory = test::cache_directory(dir.path());
    const std::string temporary = DiskStore::relative_path_of(kPrint) + ".tmp.host.1.2";
    ASSERT_TRUE(directory->write_atomic(temporary, "half an entry").ok());
    auto size = measure_directory(*directory);
    ASSERT_TRUE(size.ok());
    EXPECT_EQ(size->temporaries, 1u);
    EXPECT_EQ(size->temporary_bytes, 13u);
    CleanupRequest clear;
    clear.evict_older_than = std::chrono::hours(-1);
    EXPECT_EQ(clean_directory(*directory, clear)->temps_swept, 0u) << "a fresh one is a writer's";
    clear.all_temporaries = true;
    EXPECT_EQ(clean_directory(*directory, clear)->temps_swept, 1u);
    EXPECT_EQ(measure_directory(*directory)->temporaries, 0u);
}

TEST(CacheDirectory, TheTemporariesOfKcacheConfAndOfTheStatisticsAreCountedAndCleared) {
    TempDir dir;
    auto directory = test::cache_directory(dir.path());
    ASSERT_TRUE(directory->write_atomic("kcache.conf.tmp.host.1.2", "max_files = 1\n").ok());
    ASSERT_TRUE(directory->write_atomic("stats/3.tmp.host.1.2", "kcache-stats 1\n").ok());
    ASSERT_TRUE(directory->write_atomic("stats/notes.tmp.x", "mine").ok());  // not kcache's
    EXPECT_EQ(measure_directory(*directory)->temporaries, 2u);
    CleanupRequest clear;
    clear.all_temporaries = true;
    // A fresh one is an update at work, which even a clear leaves to land; a stale one goes.
    EXPECT_EQ(clean_directory(*directory, clear)->temps_swept, 0u);
    const timespec long_ago[2] = {{1000000000, 0}, {1000000000, 0}};
    for (const char* name : {"/kcache.conf.tmp.host.1.2", "/stats/3.tmp.host.1.2"}) {
        ASSERT_EQ(utimensat(AT_FDCWD, (dir.path() + name).c_str(), long_ago, 0), 0);
    }
    EXPECT_EQ(clean_directory(*directory, CleanupRequest{})->temps_swept, 2u);
    EXPECT_EQ(measure_directory(*directory)->temporaries, 0u);
    EXPECT_TRUE(fs::exists(dir.path() + "/stats/notes.tmp.x"));
}

TEST(CacheDirectory, AReplacedDirectoryIsAcceptedAgainBeforeItIsUsed) {
    TempDir dir;
    const std::string path = dir.path() + "/cache";
    auto directory = test::cache_directory(path);
    fs::remove_all(path);
    fs::create_directories(path);
    ASSERT_EQ(chmod(path.c_str(), 0777), 0);  // made again, by someone careless
    EXPECT_FALSE(directory->check_replaced()) << "a directory that would be refused is not used";
    ASSERT_EQ(chmod(path.c_str(), 0700), 0);
    EXPECT_TRUE(directory->check_replaced());
    ASSERT_TRUE(directory->write_atomic("x", "y").ok());
    EXPECT_TRUE(fs::exists(path + "/x"));
}

TEST(Log, WarningsAreOnByDefaultAndEachTopicIsSaidOnce) {
    TempDir dir;
    const std::string file = dir.path() + "/stderr";
    util::set_log_setting("warn");
    EXPECT_TRUE(util::log_enabled(util::LogLevel::kWarn));
    EXPECT_FALSE(util::log_enabled(util::LogLevel::kInfo));
    {
        // The default level writes to stderr: catch it in a file for the test.
        std::fflush(stderr);
        const int saved = dup(2);
        const int fd = open(file.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0600);
        ASSERT_GE(fd, 0);
        dup2(fd, 2);
        close(fd);
        util::warn_once("disk", "first");
        util::warn_once("disk", "second");
        util::warn_once("other", "third");
        util::log_line(util::LogLevel::kInfo, "not at this level");
        std::fflush(stderr);
        dup2(saved, 2);
        close(saved);
    }
    EXPECT_EQ(**util::read_named_file(file, 1000), "kcache: first\nkcache: third\n");
    // Asked for more (a path: everything to that file), a topic's later lines are info lines.
    const std::string log = dir.path() + "/log";
    util::set_log_setting(log);
    util::warn_once("disk", "fourth");
    EXPECT_EQ(**util::read_named_file(log, 1000), "kcache: fourth\n");
    // A FIFO as the log file stalls nobody: the line goes to stderr instead.
    const std::string fifo = dir.path() + "/fifo";
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
    util::set_log_setting(fifo);
    util::log_line(util::LogLevel::kInfo, "to stderr");
    util::set_log_setting("off");
    EXPECT_FALSE(util::log_enabled(util::LogLevel::kWarn));
    util::set_log_setting("nonsense");  // never silences warnings
    EXPECT_TRUE(util::log_enabled(util::LogLevel::kWarn));
    util::reset_log();
}

}  // namespace
}  // namespace kcache::store
