// SPDX-License-Identifier: Apache-2.0
// The memory tier: stored entries by fingerprint, bounded in bytes, least recently used out.
// Sits in front of the disk tier so that a process asking twice reads the disk once. Entries are
// shared, not copied: a disk hit is kept here and handed out as the same bytes.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "store/artifact_format.hpp"
#include "util/fingerprint.hpp"

namespace kcache::store {

class MemoryStore {
public:
    explicit MemoryStore(std::size_t max_bytes) : max_bytes_(max_bytes) {}

    // Null on a miss.
    std::shared_ptr<const VerifiedArtifact> get(const util::Fingerprint& fingerprint);
    // An entry larger than the whole budget is not kept, nor a null one.
    void put(const util::Fingerprint& fingerprint, std::shared_ptr<const VerifiedArtifact> entry);

    std::size_t bytes() const;
    std::size_t size() const;
    std::uint64_t evictions() const;

private:
    struct Hash {
        std::size_t operator()(const util::Fingerprint& f) const noexcept { return f.low; }
    };
    struct Item {
        util::Fingerprint fingerprint;
        std::shared_ptr<const VerifiedArtifact> entry;
        std::size_t bytes;
    };

    const std::size_t max_bytes_;
    mutable std::mutex mutex_;  // guards everything below; this tier is off the hit path
    std::list<Item> order_;     // most recently used first
    std::unordered_map<util::Fingerprint, std::list<Item>::iterator, Hash> index_;
    std::size_t bytes_ = 0;
    std::uint64_t evictions_ = 0;
};

}  // namespace kcache::store
