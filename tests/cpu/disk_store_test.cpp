// SPDX-License-Identifier: Apache-2.0
// The disk tier on a real temporary directory; full-disk and read-only failures through a seam in
// the file layer (tests run as root in CI, where chmod cannot make a directory read-only).
#include "store/disk_store.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <optional>

#include "test_support.hpp"
#include "util/file_lock.hpp"
#include "util/files.hpp"

namespace kcache::store {
namespace {

namespace fs = std::filesystem;

using test::TempDir;

// Delegates to the real file system (a held directory included), failing writes with a chosen
// errno when told to.
class FaultyFiles final : public test::ForwardingFiles {
public:
    int write_errno = 0;
    Result<void> write_atomic(const util::OpenDirectory& base, std::string_view relative,
                              std::string_view bytes, util::Durability durability) override {
        if (write_errno != 0) return util::io_error("write", base.path_of(relative), write_errno);
        return ForwardingFiles::write_atomic(base, relative, bytes, durability);
    }
};

using test::sample;

const util::Fingerprint kPrint{0x0123456789abcdefULL, 0xfedcba9876543210ULL};

std::unique_ptr<DiskStore> open_store(const std::string& dir, util::Files* files = nullptr) {
    DiskOptions options;
    options.directory = dir;
    options.files = files;
    auto store = DiskStore::open(options);
    EXPECT_TRUE(store.ok()) << store.error().describe();
    return store.ok() ? std::move(*store) : nullptr;
}

// Damages a stored entry in its middle (replaced as a writer would); false if it cannot.
bool flip_a_middle_bit(const std::string& path) {
    auto bytes = util::read_named_file(path, std::uint64_t{1} << 30);
    if (!bytes.ok() || !bytes->has_value()) return false;
    std::string damaged = **bytes;
    damaged[damaged.size() / 2] ^= 0x20;
    return test::replace_file(path, damaged);
}

TEST(DiskStore, PutThenGetReturnsTheEntry) {
    TempDir dir;
    auto store = open_store(dir.path() + "/cache");
    ASSERT_TRUE(store->put(kPrint, sample()).ok());
    auto got = store->get(kPrint);
    ASSERT_NE(got, nullptr);
    EXPECT_EQ(got->owned(), sample());
    EXPECT_EQ(store->stats().hits, 1u);
    EXPECT_EQ(store->stats().writes, 1u);
}

TEST(DiskStore, AnEntryIsSyncedBeforeItIsRenamedIntoPlace) {
    TempDir dir;
    test::DurabilityLog files;
    auto store = open_store(dir.path() + "/cache", &files);
    ASSERT_TRUE(store->put(kPrint, sample()).ok());
    ASSERT_EQ(files.writes.count(store->path_of(kPrint)), 1u);
    EXPECT_EQ(files.writes.at(store->path_of(kPrint)), util::Durability::kSynced);
}

TEST(DiskStore, AnotherStoreOnTheSameDirectorySeesTheEntry) {
    TempDir dir;
    ASSERT_TRUE(open_store(dir.path())->put(kPrint, sample()).ok());
    EXPECT_NE(open_store(dir.path())->get(kPrint), nullptr);
}

TEST(DiskStore, MissingEntryIsAMissNotAnError) {
    TempDir dir;
    auto store = open_store(dir.path());
    EXPECT_EQ(store->get(kPrint), nullptr);
    EXPECT_EQ(store->stats().misses, 1u);
    EXPECT_EQ(store->stats().errors, 0u);
}

TEST(DiskStore, LookupsFollowADirectoryRemovedAndMadeAgainOnceAWriteFindsIt) {
    // Lookups open entries below the directory the store opened. Removed (kcache -C by hand, an
    // rm -rf) and made again by the next write, it must not keep them reading the removed one.
    TempDir dir;
    const std::string path = dir.path() + "/cache";
    auto store = open_store(path);
    ASSERT_TRUE(store->put(kPrint, sample()).ok());
    ASSERT_NE(store->get(kPrint), nullptr);

    fs::remove_all(path);
    const util::Fingerprint other{1, 2};
    ASSERT_TRUE(store->put(other, sample("other")).ok());  // makes the directory again
    auto got = store->get(other);
    ASSERT_NE(got, nullptr);
    EXPECT_EQ(got->owned(), sample("other"));
}

TEST(DiskStore, AFailedWriteStillFindsTheDirectoryReplaced) {
    // A process whose writes fail (a full disk) must not keep missing against a removed directory
    // while another process fills the one made in its place.
    TempDir dir;
    const std::string path = dir.path() + "/cache";
    FaultyFiles files;
    auto store = open_store(path, &files);
    ASSERT_TRUE(store->put(kPrint, sample()).ok());

    fs::remove_all(path);
    const util::Fingerprint other{1, 2};
    ASSERT_TRUE(open_store(path)->put(other, sample("other")).ok());  // another process
    files.write_errno = ENOSPC;
    EXPECT_FALSE(store->put(util::Fingerprint{3, 4}, sample("third")).ok());
    auto got = store->get(other);
    ASSERT_NE(got, nullptr);
    EXPECT_EQ(got->owned(), sample("other"));
}

TEST(DiskStore, ACorruptEntryInADirectorySinceReplacedLeavesTheNewOnesEntryAlone) {
    // Read below the directory this store opened, removed by path: after the directory was
    // renamed away and made again, the path names a good entry of the same name.
    TempDir dir;
    const std::string path = dir.path() + "/cache";
    auto store = open_store(path);
    ASSERT_TRUE(store->put(kPrint, sample()).ok());
    fs::rename(path, dir.path() + "/old");
    auto replacing = open_store(path);
    ASSERT_TRUE(replacing->put(kPrint, sample("new")).ok());
    const std::string old_entry = dir.path() + "/old/" + DiskStore::relative_path_of(kPrint);
    std::string bytes = *util::read_named_file(old_entry, std::uint64_t{1} << 30).value();
    bytes[bytes.size() / 2] ^= 0x40;
    ASSERT_TRUE(test::replace_file(old_entry, bytes));

    EXPECT_EQ(store->get(kPrint), nullptr);
    EXPECT_EQ(store->stats().corrupt, 1u);
    auto kept = replacing->get(kPrint);
    ASSERT_NE(kept, nullptr) << "the replacing directory's entry was removed";
    EXPECT_EQ(kept->owned(), sample("new"));
}

TEST(DiskStore, EntryPathIsSplitByTheFingerprintsFirstByte) {
    TempDir dir;
    auto store = open_store(dir.path());
    EXPECT_EQ(store->path_of(kPrint), dir.path() + "/01/23456789abcdeffedcba9876543210.kc");
}

TEST(DiskStore, CreatesItsDirectoryPrivate) {
    TempDir dir;
    const std::string path = dir.path() + "/a/b/kcache";
    ASSERT_NE(open_store(path), nullptr);
    struct stat info {};
    ASSERT_EQ(stat(path.c_str(), &info), 0);
    EXPECT_EQ(info.st_mode & 0777, 0700u);
}

TEST(DiskStore, RefusesAWorldWritableDirectoryAndSaysWhy) {
    TempDir dir;
    ASSERT_EQ(chmod(dir.path().c_str(), 0777), 0);
    DiskOptions options;
    options.directory = dir.path();
    auto store = DiskStore::open(options);
    ASSERT_FALSE(store.ok());
    EXPECT_NE(store.error().message().find("world-writable"), std::string::npos);
    EXPECT_NE(store.error().message().find("0777"), std::string::npos);
}

TEST(DiskStore, AcceptsASharedDirectoryWhenAllowed) {
    TempDir dir;
    ASSERT_EQ(chmod(dir.path().c_str(), 0775), 0);
    DiskOptions options;
    options.directory = dir.path();
    options.allow_shared_directory = true;
    EXPECT_TRUE(DiskStore::open(options).ok());
}

TEST(DiskStore, CorruptEntryIsAMissAndIsRemoved) {
    TempDir dir;
    auto store = open_store(dir.path());
    ASSERT_TRUE(store->put(kPrint, sample()).ok());
    const std::string path = store->path_of(kPrint);
    ASSERT_TRUE(flip_a_middle_bit(path));
    EXPECT_EQ(store->get(kPrint), nullptr);
    EXPECT_EQ(store->stats().corrupt, 1u);
    EXPECT_FALSE(fs::exists(path));
}

TEST(DiskStore, TruncatedEntryIsAMissAndIsRemoved) {
    TempDir dir;
    auto store = open_store(dir.path());
    ASSERT_TRUE(store->put(kPrint, sample(std::string(5000, 'q'))).ok());
    fs::resize_file(store->path_of(kPrint), 100);
    EXPECT_EQ(store->get(kPrint), nullptr);
    EXPECT_EQ(store->stats().corrupt, 1u);
}

// The real file system, noting what each read_bytes() gave: mapped or read.
class MappingSpy final : public test::ForwardingFiles {
public:
    int mapped = 0, read = 0;
    Result<std::optional<util::FileBytes>> read_bytes(const util::OpenDirectory& base,
                                                      std::string_view relative,
                                                      std::uint64_t max_bytes,
                                                      std::chrono::seconds stamp_after,
                                                      const util::Writers* writers,
                                                      std::uint64_t map_from) override {
        auto bytes = util::real_files().read_bytes(base, relative, max_bytes, stamp_after, writers,
                                                   map_from);
        if (bytes && *bytes) ++((*bytes)->mapped() ? mapped : read);
        return bytes;
    }
};

TEST(DiskStore, ALargeEntryIsMappedAndServesLikeARead) {
    TempDir dir;
    MappingSpy files;
    auto store = open_store(dir.path() + "/cache", &files);
    const Artifact large = sample(std::string(kMapEntryFrom + 4096, 'c'));
    const util::Fingerprint small_print{1, 2};
    ASSERT_TRUE(store->put(kPrint, large).ok());
    ASSERT_TRUE(store->put(small_print, sample()).ok());
    auto got = store->get(kPrint);
    ASSERT_NE(got, nullptr);
    EXPECT_EQ(got->owned(), large);
    auto small = store->get(small_print);
    ASSERT_NE(small, nullptr);
    EXPECT_EQ(small->owned(), sample());
    if (!test::maps_files_on(dir.path())) GTEST_SKIP() << "not a local file system kcache maps";
    EXPECT_EQ(files.mapped, 1);
    EXPECT_EQ(files.read, 1);  // the small entry
    // The entry replaced or removed while it is held: what was found stays as it was.
    ASSERT_TRUE(store->put(kPrint, sample(std::string(kMapEntryFrom + 4096, 'd'))).ok());
    fs::remove(store->path_of(kPrint));
    EXPECT_EQ(got->owned(), large);
}

TEST(DiskStore, ALargeCorruptOrCutEntryIsAMissAndIsRemoved) {
    TempDir dir;
    MappingSpy files;
    auto store = open_store(dir.path(), &files);
    const Artifact large = sample(std::string(kMapEntryFrom * 2, 'e'));
    ASSERT_TRUE(store->put(kPrint, large).ok());
    const std::string path = store->path_of(kPrint);
    ASSERT_TRUE(flip_a_middle_bit(path));
    EXPECT_EQ(store->get(kPrint), nullptr);
    EXPECT_EQ(store->stats().corrupt, 1u);
    EXPECT_FALSE(fs::exists(path));

    ASSERT_TRUE(store->put(kPrint, large).ok());
    fs::resize_file(path, kMapEntryFrom + 100);  // cut, still large enough to be mapped
    EXPECT_EQ(store->get(kPrint), nullptr);
    EXPECT_EQ(store->stats().corrupt, 2u);
    EXPECT_FALSE(fs::exists(path));
    ASSERT_TRUE(store->put(kPrint, large).ok());
    auto good = store->get(kPrint);
    ASSERT_NE(good, nullptr);
    EXPECT_EQ(good->owned(), large);
}

TEST(DiskStore, FullDiskIsACountedErrorAndLeavesNothingBehind) {
    TempDir dir;
    FaultyFiles files;
    auto store = open_store(dir.path(), &files);
    files.write_errno = ENOSPC;
    auto put = store->put(kPrint, sample());
    ASSERT_FALSE(put.ok());
    EXPECT_EQ(put.error().code(), Errc::kIoError);
    EXPECT_NE(put.error().message().find("No space left"), std::string::npos);
    EXPECT_EQ(store->stats().errors, 1u);
    EXPECT_FALSE(fs::exists(store->path_of(kPrint)));
    EXPECT_EQ(store->get(kPrint), nullptr);  // and reads still work
}

TEST(DiskStore, ReadOnlyDirectoryIsACountedError) {
    TempDir dir;
    FaultyFiles files;
    auto store = open_store(dir.path(), &files);
    files.write_errno = EROFS;
    EXPECT_FALSE(store->put(kPrint, sample()).ok());
    EXPECT_EQ(store->stats().errors, 1u);
}

TEST(DefaultDirectory, FollowsKcacheDirThenXdgThenHome) {
    const char* saved_dir = getenv("KCACHE_DIR");
    const char* saved_xdg = getenv("XDG_CACHE_HOME");
    const char* saved_home = getenv("HOME");
    const std::string keep_dir = saved_dir ? saved_dir : "";
    const std::string keep_xdg = saved_xdg ? saved_xdg : "";
    const std::string keep_home = saved_home ? saved_home : "";

    setenv("KCACHE_DIR", "/k", 1);
    setenv("XDG_CACHE_HOME", "/x", 1);
    setenv("HOME", "/h", 1);
    EXPECT_EQ(*default_directory(), "/k");
    unsetenv("KCACHE_DIR");
    EXPECT_EQ(*default_directory(), "/x/kcache");
    unsetenv("XDG_CACHE_HOME");
    EXPECT_EQ(*default_directory(), "/h/.cache/kcache");
    unsetenv("HOME");
    auto none = default_directory();
    EXPECT_FALSE(none.ok());

    auto restore = [](const char* name, bool had, const std::string& value) {
        if (had) {
            setenv(name, value.c_str(), 1);
        } else {
            unsetenv(name);
        }
    };
    restore("KCACHE_DIR", saved_dir != nullptr, keep_dir);
    restore("XDG_CACHE_HOME", saved_xdg != nullptr, keep_xdg);
    restore("HOME", saved_home != nullptr, keep_home);
}

}  // namespace
}  // namespace kcache::store

namespace kcache::store {
namespace {

TEST(DiskStore, RefusesADirectoryOwnedByAnotherUser) {
    TempDir dir;
    // As root (CI) chown works; elsewhere this test cannot set the scene and says so.
    if (chown(dir.path().c_str(), 12345, 12345) != 0) GTEST_SKIP() << "cannot chown here";
    ASSERT_EQ(chmod(dir.path().c_str(), 0700), 0);
    DiskOptions options;
    options.directory = dir.path();
    auto store = DiskStore::open(options);
    ASSERT_FALSE(store.ok());
    EXPECT_NE(store.error().message().find("another user"), std::string::npos);
}

}  // namespace
}  // namespace kcache::store

namespace kcache::util {
namespace {

TEST(FileLock, ASecondHolderGivesUpAfterItsPatienceAndGetsItOnceReleased) {
    test::TempDir dir;
    const std::string path = dir.path() + "/artifact.lock";
    auto first = FileLock::acquire(path, std::chrono::milliseconds(100));
    ASSERT_TRUE(first.has_value());
    const auto start = std::chrono::steady_clock::now();
    EXPECT_FALSE(FileLock::acquire(path, std::chrono::milliseconds(50)).has_value());
    EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(50));
    first.reset();
    EXPECT_TRUE(FileLock::acquire(path, std::chrono::milliseconds(50)).has_value());
}

TEST(FileLock, AnUnopenableLockFileIsNoLockRatherThanAnError) {
    EXPECT_FALSE(
        FileLock::acquire("/nonexistent-dir/x.lock", std::chrono::milliseconds(10)).has_value());
}

}  // namespace
}  // namespace kcache::util
