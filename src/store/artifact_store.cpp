#include "store/artifact_store.hpp"

namespace kcache::store {

std::optional<Found> ArtifactStore::get(const util::Fingerprint& fingerprint) {
    if (auto entry = memory_.get(fingerprint)) {
        memory_hits_.fetch_add(1, std::memory_order_relaxed);
        return Found{std::move(entry), Tier::kMemory};
    }
    if (!disk_) return std::nullopt;
    // Not copied up to memory: a disk hit is loaded at once and the driver keeps what it needs,
    // and holding every hit's bytes cost a new process 8-9 us a kernel in first touches of memory
    // on the H200 host (measured). A later get reads the disk again, from the page cache.
    auto entry = disk_->get(fingerprint);
    if (!entry) return std::nullopt;
    return Found{std::move(entry), Tier::kDisk};
}

std::shared_ptr<const DecodedEntry> ArtifactStore::read_back(const util::Fingerprint& fingerprint) {
    auto entry = memory_.get(fingerprint);
    if (!entry && disk_) entry = disk_->get(fingerprint, DiskStore::Reading::kReadBack);
    if (entry) read_backs_.fetch_add(1, std::memory_order_relaxed);
    return entry;
}

std::shared_ptr<const DecodedEntry> ArtifactStore::put(const util::Fingerprint& fingerprint,
                                                       const StoredEntry& entry,
                                                       DiskStore::Cleaning cleaning) {
    // A compile's entry, once through the entry format: what a disk hit would have kept.
    auto decoded = DecodedEntry::of(entry);
    memory_.put(fingerprint, decoded);
    // Ignored on purpose: DiskStore counts and logs the failure, and memory still has the entry.
    if (disk_) (void)disk_->put(fingerprint, entry, cleaning);
    return decoded;
}

ArtifactStats ArtifactStore::stats() const {
    ArtifactStats s;
    s.memory_hits = memory_hits_.load(std::memory_order_relaxed);
    s.read_backs = read_backs_.load(std::memory_order_relaxed);
    s.memory_entries = memory_.size();
    s.memory_bytes = memory_.bytes();
    s.disk_enabled = disk_ != nullptr;
    if (disk_) s.disk = disk_->stats();
    return s;
}

}  // namespace kcache::store
