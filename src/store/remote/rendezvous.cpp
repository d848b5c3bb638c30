// SPDX-License-Identifier: Apache-2.0
#include "store/remote/rendezvous.hpp"

// Inline, as in util/fingerprint.cpp: no run-time libxxhash on machines that only have a driver.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cmath>

namespace kcache::store::remote {

namespace {

// The standard weighted HRW score, -weight / ln(u) with u uniform in (0, 1): the shard with the
// highest score wins, and each shard wins a share of keys proportional to its weight.
double score(const RendezvousShard& shard, std::string_view key) {
    const std::uint64_t seed = XXH3_64bits(shard.name.data(), shard.name.size());
    const std::uint64_t hash = XXH3_64bits_withSeed(key.data(), key.size(), seed);
    // The top 53 bits plus a half step: exactly representable, never 0 or 1, so ln(u) < 0.
    const double u = (static_cast<double>(hash >> 11) + 0.5) * 0x1.0p-53;
    return -static_cast<double>(shard.weight) / std::log(u);
}

}  // namespace

std::size_t rendezvous_pick(std::span<const RendezvousShard> shards, std::string_view key) {
    if (shards.size() <= 1) return 0;
    std::size_t best = 0;
    double best_score = score(shards[0], key);
    for (std::size_t i = 1; i < shards.size(); ++i) {
        const double candidate = score(shards[i], key);
        // A tie goes to the smaller name, so that the order the shards are listed in never matters.
        if (candidate > best_score ||
            (candidate == best_score && shards[i].name < shards[best].name)) {
            best = i;
            best_score = candidate;
        }
    }
    return best;
}

}  // namespace kcache::store::remote
