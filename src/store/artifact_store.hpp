// The tiers behind a cache miss, by fingerprint: memory (what this process compiled), then disk (a
// hit is not copied up: see get()). Either tier may be absent; an absent or failing disk leaves
// kcache working from memory.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>

#include "store/disk_store.hpp"
#include "store/memory_store.hpp"

namespace kcache::store {

struct ArtifactStats {
    std::uint64_t memory_hits = 0;
    std::uint64_t read_backs = 0;  // entries read again for code loaded without its bytes
    std::uint64_t memory_entries = 0;
    std::uint64_t memory_bytes = 0;
    DiskStats disk;
    bool disk_enabled = false;
};

enum class Tier { kMemory, kDisk };

struct Found {
    std::shared_ptr<const DecodedEntry> entry;  // never null; a memory hit's is the tier's own
    Tier tier;
};

class ArtifactStore {
public:
    // `disk` may be null (memory only).
    ArtifactStore(std::size_t memory_bytes, std::unique_ptr<DiskStore> disk)
        : memory_(memory_bytes), disk_(std::move(disk)) {}

    std::optional<Found> get(const util::Fingerprint& fingerprint);
    // The bytes of code loaded earlier without keeping them, for another context: get() without
    // counting a lookup; a success counts as a read-back. Null when no tier has the entry.
    std::shared_ptr<const DecodedEntry> read_back(const util::Fingerprint& fingerprint);
    // Puts to every tier. A disk failure is counted by the disk tier and otherwise ignored here:
    // the artifact is still in memory and the caller's kernel still loads. Returns the entry as
    // the memory tier holds it (decoded, as a hit would be), for loading in place.
    std::shared_ptr<const DecodedEntry> put(
        const util::Fingerprint& fingerprint, const StoredEntry& entry,
        DiskStore::Cleaning cleaning = DiskStore::Cleaning::kNow);

    ArtifactStats stats() const;
    DiskStore* disk() const noexcept { return disk_.get(); }

private:
    MemoryStore memory_;
    std::unique_ptr<DiskStore> disk_;
    std::atomic<std::uint64_t> memory_hits_{0};
    std::atomic<std::uint64_t> read_backs_{0};
};

}  // namespace kcache::store
