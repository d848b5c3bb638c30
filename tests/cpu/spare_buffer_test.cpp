// SPDX-License-Identifier: Apache-2.0
// Each thread's spare buffer: what a dropped entry gives back, the next file read reuses.
#include "util/spare_buffer.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "store/artifact_format.hpp"
#include "store/cache_directory.hpp"
#include "test_support.hpp"
#include "util/files.hpp"

namespace kcache::util {
namespace {

std::string bytes_of(std::size_t size) {
    std::string bytes(size, 'x');
    return bytes;
}

TEST(SpareBufferTest, WhatIsGivenIsTakenBackEmptyWithItsStorage) {
    (void)take_spare_buffer();  // whatever an earlier test left
    std::string given = bytes_of(10000);
    const char* storage = given.data();
    give_spare_buffer(std::move(given));
    std::string taken = take_spare_buffer();
    EXPECT_TRUE(taken.empty());
    EXPECT_GE(taken.capacity(), 10000u);
    EXPECT_EQ(taken.data(), storage);
    EXPECT_EQ(take_spare_buffer().capacity(), std::string().capacity()) << "taken once only";
}

TEST(SpareBufferTest, KeepsOneBufferAndNothingOverTheLimit) {
    (void)take_spare_buffer();
    std::string first = bytes_of(5000);
    const char* kept = first.data();
    give_spare_buffer(std::move(first));
    give_spare_buffer(bytes_of(6000));  // the slot is taken: freed
    EXPECT_EQ(take_spare_buffer().data(), kept);

    give_spare_buffer(bytes_of(kSpareBufferLimit + 1));
    EXPECT_LT(take_spare_buffer().capacity(), kSpareBufferLimit);
}

TEST(SpareBufferTest, EachThreadHasItsOwn) {
    (void)take_spare_buffer();
    std::string mine = bytes_of(8000);
    const char* storage = mine.data();
    give_spare_buffer(std::move(mine));
    std::size_t other_capacity = 0;
    std::thread([&] {
        other_capacity = take_spare_buffer().capacity();
        give_spare_buffer(bytes_of(9000));  // freed when that thread ends
    }).join();
    EXPECT_LT(other_capacity, 8000u);
    EXPECT_EQ(take_spare_buffer().data(), storage);
}

// The disk tier's path: a dropped entry's bytes become the next read's, with no fresh heap.
TEST(SpareBufferTest, AFileReadTakesTheBytesADroppedEntryGaveBack) {
    test::TempDir dir;
    store::Artifact stored;
    stored.key.arch = "sm_90";
    stored.key.source_kind = "ptx";
    stored.payload = bytes_of(12000);
    const std::string encoded = store::encode(stored);
    const std::string path = dir.path() + "/entry.kc";
    std::ofstream(path, std::ios::binary) << encoded;
    auto held = real_files().open_directory(dir.path());
    ASSERT_TRUE(held);

    (void)take_spare_buffer();
    auto first = real_files().read(*held, "entry.kc", store::kMaxEntryBytes, kNeverStamp);
    ASSERT_TRUE(first && *first);
    auto entry = store::VerifiedArtifact::decode(std::move(**first));
    ASSERT_TRUE(entry);
    const char* storage = (*entry)->payload().data();
    entry->reset();  // dropped, as a loaded disk hit is

    auto second = real_files().read(*held, "entry.kc", store::kMaxEntryBytes, kNeverStamp);
    ASSERT_TRUE(second && *second);
    EXPECT_EQ(**second, encoded);
    auto again = store::VerifiedArtifact::decode(std::move(**second));
    ASSERT_TRUE(again);
    EXPECT_EQ((*again)->payload().data(), storage) << "the same storage, read again";
}

}  // namespace
}  // namespace kcache::util
