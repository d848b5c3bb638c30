// SPDX-License-Identifier: Apache-2.0
// Weighted rendezvous (highest random weight) hashing: which shard of a backend holds a key. Each
// shard scores every key by XXH3-64 of (shard name, key); the highest weighted score wins, so
// adding or removing a shard moves only the keys that it wins or held.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace kcache::store::remote {

struct RendezvousShard {
    std::string_view name;
    std::uint32_t weight = 1;  // > 0
};

// The index of the shard that holds `key`; 0 for a single shard. `shards` must not be empty.
std::size_t rendezvous_pick(std::span<const RendezvousShard> shards, std::string_view key);

}  // namespace kcache::store::remote
