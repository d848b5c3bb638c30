// The memory tier: a byte budget with least-recently-used eviction.
#include "store/memory_store.hpp"

#include <gtest/gtest.h>

namespace kcache::store {
namespace {

StoredEntry entry_of(std::size_t payload_bytes, char fill = 'p') {
    StoredEntry entry;
    entry.payload.assign(payload_bytes, fill);
    return entry;
}

util::Fingerprint print(std::uint64_t n) {
    return {n, n * 31 + 7};
}

// Each entry costs its payload plus its (here empty-valued) key material text.
std::size_t cost_of(std::size_t payload) {
    return payload + StoredEntry{}.key.serialize().size();
}

TEST(MemoryStore, ReturnsWhatWasPut) {
    MemoryStore store(1 << 20);
    store.put(print(1), entry_of(100, 'a'));
    auto got = store.get(print(1));
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->payload, std::string(100, 'a'));
    EXPECT_FALSE(store.get(print(2)).has_value());
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
    ASSERT_TRUE(store.get(print(1)).has_value());  // 1 is now the most recent
    store.put(print(3), entry_of(1000));
    EXPECT_TRUE(store.get(print(1)).has_value());
    EXPECT_FALSE(store.get(print(2)).has_value());
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
    EXPECT_FALSE(store.get(print(1)).has_value());
    EXPECT_EQ(store.bytes(), 0u);
}

}  // namespace
}  // namespace kcache::store
