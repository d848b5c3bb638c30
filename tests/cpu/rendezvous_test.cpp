// SPDX-License-Identifier: Apache-2.0
// store::remote::rendezvous_pick: weighted rendezvous hashing over a backend's shards.
#include "store/remote/rendezvous.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace kcache::store::remote {
namespace {

constexpr int kKeys = 20000;

std::string key_of(int i) {
    return "kcache:" + std::to_string(i * 2654435761u);
}

// How many of kKeys keys each shard (by name) holds.
std::map<std::string, int> spread(const std::vector<RendezvousShard>& shards) {
    std::map<std::string, int> counts;
    for (int i = 0; i < kKeys; ++i) {
        const std::size_t pick = rendezvous_pick(shards, key_of(i));
        EXPECT_LT(pick, shards.size());
        ++counts[std::string(shards[pick].name)];
    }
    return counts;
}

TEST(Rendezvous, ASingleShardHoldsEveryKey) {
    const std::vector<RendezvousShard> one{{"only", 7}};
    for (int i = 0; i < 100; ++i) EXPECT_EQ(rendezvous_pick(one, key_of(i)), 0u);
    EXPECT_EQ(rendezvous_pick(one, ""), 0u);
}

TEST(Rendezvous, TheSameKeyAlwaysGoesToTheSameShard) {
    const std::vector<RendezvousShard> shards{{"a", 1}, {"b", 2}, {"c", 1}};
    for (int i = 0; i < 1000; ++i) {
        const std::string key = key_of(i);
        EXPECT_EQ(rendezvous_pick(shards, key), rendezvous_pick(shards, key)) << key;
    }
}

// Each shard scores a key by itself, so the order a user lists the shards in changes nothing.
TEST(Rendezvous, TheOrderOfTheShardsDoesNotChangeWhichOneHoldsAKey) {
    const std::vector<RendezvousShard> forward{{"a", 3}, {"b", 1}, {"c", 2}};
    const std::vector<RendezvousShard> backward{{"c", 2}, {"b", 1}, {"a", 3}};
    for (int i = 0; i < 2000; ++i) {
        const std::string key = key_of(i);
        EXPECT_EQ(forward[rendezvous_pick(forward, key)].name,
                  backward[rendezvous_pick(backward, key)].name)
            << key;
    }
}

TEST(Rendezvous, EqualWeightsSpreadKeysEvenly) {
    const auto counts = spread({{"a", 1}, {"b", 1}, {"c", 1}, {"d", 1}});
    ASSERT_EQ(counts.size(), 4u);
    for (const auto& [name, count] : counts) {
        EXPECT_GT(count, kKeys / 4 * 9 / 10) << name;
        EXPECT_LT(count, kKeys / 4 * 11 / 10) << name;
    }
}

TEST(Rendezvous, EachShardHoldsAShareOfKeysCloseToItsWeight) {
    const auto counts = spread({{"a", 3}, {"b", 1}, {"c", 6}});
    // Shares 0.3, 0.1 and 0.6, each within a few points.
    EXPECT_NEAR(counts.at("a") / double{kKeys}, 0.3, 0.03);
    EXPECT_NEAR(counts.at("b") / double{kKeys}, 0.1, 0.03);
    EXPECT_NEAR(counts.at("c") / double{kKeys}, 0.6, 0.03);
}

TEST(Rendezvous, RemovingAShardMovesOnlyTheKeysItHeld) {
    const std::vector<RendezvousShard> all{{"a", 1}, {"b", 2}, {"c", 1}, {"d", 3}};
    std::vector<RendezvousShard> without_c = all;
    without_c.erase(without_c.begin() + 2);
    int moved = 0;
    for (int i = 0; i < kKeys; ++i) {
        const std::string key = key_of(i);
        const std::string_view before = all[rendezvous_pick(all, key)].name;
        const std::string_view after = without_c[rendezvous_pick(without_c, key)].name;
        if (before != "c") {
            EXPECT_EQ(before, after) << key;
        } else {
            EXPECT_NE(after, "c");
            ++moved;
        }
    }
    // c held about a seventh of the keys; all of those, and only those, moved.
    EXPECT_GT(moved, kKeys / 7 * 8 / 10);
    EXPECT_LT(moved, kKeys / 7 * 12 / 10);
}

TEST(Rendezvous, AddingAShardTakesKeysOnlyForItself) {
    const std::vector<RendezvousShard> before{{"a", 1}, {"b", 1}};
    const std::vector<RendezvousShard> after{{"a", 1}, {"b", 1}, {"new", 2}};
    int taken = 0;
    for (int i = 0; i < kKeys; ++i) {
        const std::string key = key_of(i);
        const std::string_view old_holder = before[rendezvous_pick(before, key)].name;
        const std::string_view new_holder = after[rendezvous_pick(after, key)].name;
        if (new_holder == "new") {
            ++taken;
        } else {
            EXPECT_EQ(old_holder, new_holder) << key;
        }
    }
    EXPECT_NEAR(taken / double{kKeys}, 0.5, 0.03);
}

}  // namespace
}  // namespace kcache::store::remote
