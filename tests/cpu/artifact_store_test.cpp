// The tiers together: memory in front of disk, disk hits promoted, disk failures not fatal.
#include "store/artifact_store.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "test_support.hpp"

namespace kcache::store {
namespace {

namespace fs = std::filesystem;

using test::TempDir;

std::unique_ptr<DiskStore> disk_at(const std::string& path) {
    DiskOptions options;
    options.directory = path;
    auto disk = DiskStore::open(options);
    EXPECT_TRUE(disk.ok());
    return disk.ok() ? std::move(*disk) : nullptr;
}

StoredEntry entry_with(const std::string& payload) {
    StoredEntry entry;
    entry.payload = payload;
    return entry;
}

const util::Fingerprint kPrint{1, 2};

TEST(ArtifactStore, SecondGetIsServedFromMemory) {
    TempDir dir;
    ArtifactStore store(1 << 20, disk_at(dir.path()));
    store.put(kPrint, entry_with("cubin"));
    ASSERT_TRUE(store.get(kPrint).has_value());
    EXPECT_EQ(store.stats().memory_hits, 1u);
    EXPECT_EQ(store.stats().disk.hits, 0u);
}

TEST(ArtifactStore, ANewStoreOnTheSameDirectoryHitsDiskThenMemory) {
    TempDir dir;
    ArtifactStore(1 << 20, disk_at(dir.path())).put(kPrint, entry_with("cubin"));
    ArtifactStore fresh(1 << 20, disk_at(dir.path()));  // as a new process would
    auto first = fresh.get(kPrint);
    ASSERT_TRUE(first.has_value());
    EXPECT_EQ(first->entry->payload(), "cubin");
    EXPECT_EQ(first->tier, Tier::kDisk);
    EXPECT_EQ(fresh.stats().disk.hits, 1u);
    auto second = fresh.get(kPrint);
    ASSERT_TRUE(second.has_value());
    EXPECT_EQ(second->tier, Tier::kMemory);
    EXPECT_EQ(fresh.stats().memory_hits, 1u);
    EXPECT_EQ(fresh.stats().disk.hits, 1u);
}

TEST(ArtifactStore, ADiskHitIsPromotedToMemoryAndServedFromThereWithTheSameBytes) {
    TempDir dir;
    ArtifactStore(1 << 20, disk_at(dir.path())).put(kPrint, entry_with("cubin bytes"));
    ArtifactStore fresh(1 << 20, disk_at(dir.path()));
    auto from_disk = fresh.get(kPrint);
    ASSERT_TRUE(from_disk.has_value());
    ASSERT_EQ(from_disk->tier, Tier::kDisk);
    // Gone from the disk: only the memory tier can serve the next get.
    for (const auto& item : fs::recursive_directory_iterator(dir.path())) {
        if (item.path().extension() == ".kc") fs::remove(item.path());
    }
    auto from_memory = fresh.get(kPrint);
    ASSERT_TRUE(from_memory.has_value());
    EXPECT_EQ(from_memory->tier, Tier::kMemory);
    EXPECT_EQ(from_memory->entry->payload(), "cubin bytes");
    // Promoted by sharing: the memory hit hands out the very bytes the disk hit read.
    EXPECT_EQ(from_memory->entry->payload().data(), from_disk->entry->payload().data());
    EXPECT_EQ(fresh.stats().memory_entries, 1u);
}

TEST(ArtifactStore, APutEntryComesBackWithEveryField) {
    StoredEntry entry = entry_with("cubin bytes");
    entry.key.arch = "sm_90";
    entry.key.source_hash = "0123";
    entry.key.caller_key = "gelu:16";
    entry.key.kernel_names = {"gelu", "gelu_tail"};
    ArtifactStore store(1 << 20, nullptr);
    store.put(kPrint, entry);
    auto got = store.get(kPrint);
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->entry->owned(), entry);
}

TEST(ArtifactStore, WorksFromMemoryWithoutADisk) {
    ArtifactStore store(1 << 20, nullptr);
    store.put(kPrint, entry_with("cubin"));
    EXPECT_TRUE(store.get(kPrint).has_value());
    EXPECT_FALSE(store.stats().disk_enabled);
}

}  // namespace
}  // namespace kcache::store
