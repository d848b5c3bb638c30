// SPDX-License-Identifier: Apache-2.0
// The tiers together: memory in front of disk, disk hits not copied up, disk failures not fatal.
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

Artifact entry_with(const std::string& payload) {
    Artifact entry;
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

TEST(ArtifactStore, ANewStoreOnTheSameDirectoryHitsTheDiskEachTime) {
    TempDir dir;
    ArtifactStore(1 << 20, disk_at(dir.path())).put(kPrint, entry_with("cubin"));
    ArtifactStore fresh(1 << 20, disk_at(dir.path()));  // as a new process would
    auto first = fresh.get(kPrint);
    ASSERT_TRUE(first.has_value());
    EXPECT_EQ(first->entry->payload(), "cubin");
    EXPECT_EQ(first->tier, Tier::kDisk);
    auto second = fresh.get(kPrint);
    ASSERT_TRUE(second.has_value());
    EXPECT_EQ(second->tier, Tier::kDisk);
    EXPECT_EQ(second->entry->payload(), "cubin");
    EXPECT_EQ(second->entry->owned(), first->entry->owned());
    EXPECT_EQ(fresh.stats().memory_hits, 0u);
    EXPECT_EQ(fresh.stats().disk.hits, 2u);
}

// A disk hit's bytes belong to whoever took it: memory keeps no copy, so that a new process
// loading many kernels does not hold (and first-touch) every file it read.
TEST(ArtifactStore, ADiskHitLeavesNothingInMemory) {
    TempDir dir;
    ArtifactStore(1 << 20, disk_at(dir.path())).put(kPrint, entry_with("cubin bytes"));
    ArtifactStore fresh(1 << 20, disk_at(dir.path()));
    std::weak_ptr<const VerifiedArtifact> read;
    {
        auto from_disk = fresh.get(kPrint);
        ASSERT_TRUE(from_disk.has_value());
        ASSERT_EQ(from_disk->tier, Tier::kDisk);
        read = from_disk->entry;
    }
    EXPECT_TRUE(read.expired()) << "the store kept the entry it read";
    EXPECT_EQ(fresh.stats().memory_entries, 0u);
    EXPECT_EQ(fresh.stats().memory_bytes, 0u);
    // Gone from the disk: nothing serves the next get.
    test::remove_entries(dir.path());
    EXPECT_FALSE(fresh.get(kPrint).has_value());
}

// What this process compiled is kept in memory, and served from there.
TEST(ArtifactStore, APutIsServedFromMemoryWithTheSameBytes) {
    TempDir dir;
    ArtifactStore store(1 << 20, disk_at(dir.path()));
    store.put(kPrint, entry_with("cubin bytes"));
    auto first = store.get(kPrint);
    auto second = store.get(kPrint);
    ASSERT_TRUE(first.has_value() && second.has_value());
    EXPECT_EQ(first->tier, Tier::kMemory);
    EXPECT_EQ(second->entry->payload().data(), first->entry->payload().data());
    EXPECT_EQ(store.stats().memory_hits, 2u);
    EXPECT_EQ(store.stats().disk.hits, 0u);
}

TEST(ArtifactStore, APutEntryComesBackWithEveryField) {
    Artifact entry = entry_with("cubin bytes");
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
