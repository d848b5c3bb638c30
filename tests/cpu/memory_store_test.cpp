// SPDX-License-Identifier: Apache-2.0
// The memory tier: a byte budget with least-recently-used eviction.
#include "store/memory_store.hpp"

#include <gtest/gtest.h>

namespace kcache::store {
namespace {

std::shared_ptr<const VerifiedArtifact> entry_of(std::size_t payload_bytes, char fill = 'p') {
    Artifact entry;
    entry.payload.assign(payload_bytes, fill);
    return VerifiedArtifact::of(entry);
}

util::Fingerprint print(std::uint64_t n) {
    return {n, n * 31 + 7};
}

// Each entry costs its payload plus its (here empty-valued) key material text.
std::size_t cost_of(std::size_t payload) {
    return payload + Artifact{}.key.serialize().size();
}

TEST(MemoryStore, ReturnsWhatWasPut) {
    MemoryStore store(1 << 20);
    store.put(print(1), entry_of(100, 'a'));
    store.put(print(2), entry_of(100, 'b'));
    auto got = store.get(print(1));
    ASSERT_NE(got, nullptr);
    EXPECT_EQ(got->payload(), std::string(100, 'a'));
    EXPECT_EQ(store.get(print(3)), nullptr);
}

TEST(MemoryStore, AHitSharesTheEntryThatWasPut) {
    MemoryStore store(1 << 20);
    auto entry = entry_of(100, 'a');
    store.put(print(1), entry);
    EXPECT_EQ(store.get(print(1)), entry);
    EXPECT_EQ(store.get(print(1)), entry);
}

TEST(MemoryStore, ANullEntryIsNotKept) {
    MemoryStore store(1 << 20);
    store.put(print(1), nullptr);
    EXPECT_EQ(store.size(), 0u);
    EXPECT_EQ(store.get(print(1)), nullptr);
}

TEST(MemoryStore, StaysWithinItsByteBudget) {
    MemoryStore store(cost_of(1000) * 3);
    for (std::uint64_t i = 0; i < 10; ++i) store.put(print(i), entry_of(1000));
    EXPECT_LE(store.bytes(), cost_of(1000) * 3);
    EXPECT_EQ(store.size(), 3u);
    EXPECT_EQ(store.evictions(), 7u);
}

TEST(MemoryStore, EvictsTheLeastRecentlyUsed) {
    MemoryStore store(cost_of(1000) * 2);
    store.put(print(1), entry_of(1000));
    store.put(print(2), entry_of(1000));
    ASSERT_NE(store.get(print(1)), nullptr);  // 1 is now the most recent
    store.put(print(3), entry_of(1000));
    EXPECT_NE(store.get(print(1)), nullptr);
    EXPECT_EQ(store.get(print(2)), nullptr);
}

TEST(MemoryStore, ReplacingAnEntryKeepsTheCountRight) {
    MemoryStore store(1 << 20);
    store.put(print(1), entry_of(100));
    store.put(print(1), entry_of(300));
    EXPECT_EQ(store.size(), 1u);
    EXPECT_EQ(store.bytes(), cost_of(300));
}

TEST(MemoryStore, AnEntryLargerThanTheBudgetIsNotKept) {
    MemoryStore store(100);
    store.put(print(1), entry_of(1000));
    EXPECT_EQ(store.get(print(1)), nullptr);
    EXPECT_EQ(store.bytes(), 0u);
}

}  // namespace
}  // namespace kcache::store
