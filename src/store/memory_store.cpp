// SPDX-License-Identifier: Apache-2.0
#include "store/memory_store.hpp"

namespace kcache::store {

std::shared_ptr<const VerifiedArtifact> MemoryStore::get(const util::Fingerprint& fingerprint) {
    std::lock_guard lock(mutex_);
    auto it = index_.find(fingerprint);
    if (it == index_.end()) return nullptr;
    order_.splice(order_.begin(), order_, it->second);
    return it->second->entry;
}

void MemoryStore::put(const util::Fingerprint& fingerprint,
                      std::shared_ptr<const VerifiedArtifact> entry) {
    if (!entry) return;
    const std::size_t bytes = entry->cost();
    std::lock_guard lock(mutex_);
    if (auto it = index_.find(fingerprint); it != index_.end()) {
        bytes_ -= it->second->bytes;
        order_.erase(it->second);
        index_.erase(it);
    }
    if (bytes > max_bytes_) return;
    order_.push_front({fingerprint, std::move(entry), bytes});
    index_[fingerprint] = order_.begin();
    bytes_ += bytes;
    while (bytes_ > max_bytes_) {
        const Item& last = order_.back();
        bytes_ -= last.bytes;
        index_.erase(last.fingerprint);
        order_.pop_back();
        ++evictions_;
    }
}

std::size_t MemoryStore::bytes() const {
    std::lock_guard lock(mutex_);
    return bytes_;
}

std::size_t MemoryStore::size() const {
    std::lock_guard lock(mutex_);
    return index_.size();
}

std::uint64_t MemoryStore::evictions() const {
    std::lock_guard lock(mutex_);
    return evictions_;
}

}  // namespace kcache::store
