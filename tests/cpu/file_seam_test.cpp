// One owner of the cache directory and one file seam: a fault injected into the Files the disk
// tier was opened with reaches everything that keeps files there (the disk tier, the key index,
// the persistent statistics, the cleaner, the catalog), because each reaches its files only
// through the directory the disk tier holds.
#include <gtest/gtest.h>

#include <cerrno>
#include <filesystem>
#include <string>

#include "store/cache_directory.hpp"
#include "store/disk_catalog.hpp"
#include "store/disk_cleaner.hpp"
#include "store/disk_store.hpp"
#include "store/key_index.hpp"
#include "store/persistent_stats.hpp"
#include "test_support.hpp"

namespace kcache::store {
namespace {

// The real file system until `broken`; then every write and removal fails with ENOSPC, and every
// listing is counted.
class BrokenDisk final : public test::ForwardingFiles {
public:
    bool broken = false;
    int failed_writes = 0;
    int failed_removes = 0;
    int listings = 0;

    Result<void> write_atomic(const util::OpenDirectory& base, std::string_view relative,
                              std::string_view bytes, util::Durability durability) override {
        if (broken) {
            ++failed_writes;
            return util::io_error("write", base.path_of(relative), ENOSPC);
        }
        return ForwardingFiles::write_atomic(base, relative, bytes, durability);
    }
    Result<void> remove(const util::OpenDirectory& base, std::string_view relative) override {
        if (broken) {
            ++failed_removes;
            return util::io_error("remove", base.path_of(relative), ENOSPC);
        }
        return ForwardingFiles::remove(base, relative);
    }
    Result<std::vector<std::string>> list_directory(const util::OpenDirectory& base,
                                                    std::string_view relative) override {
        ++listings;
        return ForwardingFiles::list_directory(base, relative);
    }
};

const util::Fingerprint kStored{0x0123456789abcdefULL, 0xfedcba9876543210ULL};
const util::Fingerprint kOther{0x1111111111111111ULL, 0x2222222222222222ULL};

TEST(FileSeam, OneFaultReachesEveryUserOfTheCacheDirectory) {
    test::TempDir dir;
    BrokenDisk files;
    DiskOptions options;
    options.directory = dir.path() + "/cache";
    options.files = &files;
    auto opened = DiskStore::open(options);
    ASSERT_TRUE(opened.ok()) << opened.error().describe();
    std::unique_ptr<DiskStore> disk = std::move(*opened);
    ASSERT_TRUE(disk->put(kStored, test::sample()).ok());
    files.broken = true;

    // The disk tier.
    EXPECT_FALSE(disk->put(kOther, test::sample()).ok());
    EXPECT_GE(files.failed_writes, 1);

    // The key index: its record went to the failing seam, so nothing can be read back.
    const int before_index = files.failed_writes;
    auto index = KeyIndex::at(disk->cache_directory());
    index.record("gelu:16", kOther);
    EXPECT_GT(files.failed_writes, before_index);
    EXPECT_FALSE(index.last_stored("gelu:16").has_value());

    // The persistent statistics.
    const int before_stats = files.failed_writes;
    StatsCounters delta;
    delta.hits = 1;
    EXPECT_FALSE(PersistentStats::at(disk->cache_directory()).add(delta).ok());
    EXPECT_GT(files.failed_writes, before_stats);

    // The cleaner: the entry it was told to remove stays, its removal having failed.
    CleanupRequest everything;
    everything.all_entries = true;
    (void)disk->cleanup(everything);
    EXPECT_GE(files.failed_removes, 1);
    EXPECT_TRUE(std::filesystem::exists(disk->path_of(kStored)));

    // The catalog (`kcache ls`) lists through the same seam.
    const int before_listing = files.listings;
    auto listed = list_entries(*disk->cache_directory());
    ASSERT_TRUE(listed.ok()) << listed.error().describe();
    EXPECT_EQ(listed->size(), 1u);
    EXPECT_GT(files.listings, before_listing);
}

}  // namespace
}  // namespace kcache::store
