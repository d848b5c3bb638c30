// SPDX-License-Identifier: Apache-2.0
// The tiers behind a cache miss, by fingerprint: memory (what this process compiled), then disk (a
// hit is not copied up: see find()), then remote (a hit, once accepted, is written to disk:
// keep()). Disk and remote may be absent; an absent or failing disk leaves kcache working from
// memory, and a failing remote tier is skipped.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>

#include "kcache/result.hpp"
#include "store/disk_store.hpp"
#include "store/disk_write_queue.hpp"
#include "store/memory_store.hpp"
#include "store/remote/remote_tier.hpp"

namespace kcache::store {

struct ArtifactStats {
    // How lookups ended (count()): each lookup is one memory hit, one disk hit or one miss.
    std::uint64_t memory_hits = 0;
    std::uint64_t read_backs = 0;  // entries read again for code loaded without its bytes
    std::uint64_t memory_entries = 0;
    std::uint64_t memory_bytes = 0;
    // disk.hits and disk.misses are those of lookups, as count() was told: without a disk tier
    // they stay 0. errors, corrupt and evictions are the disk tier's own.
    DiskStats disk;
    // Misses that found an entry under the fingerprint whose key material was not the one
    // asked for (recompiled and replaced); a part of disk.misses.
    std::uint64_t disk_rejected = 0;
    bool disk_enabled = false;
    // remote.hits and remote.misses are those of lookups that reached the remote tier.
    remote::RemoteStats remote;
    bool remote_enabled = false;
};

enum class Tier { kMemory, kDisk, kRemote };

struct Found {
    std::shared_ptr<const VerifiedArtifact> entry;  // never null; a memory hit's is the tier's own
    Tier tier;
    // A memory hit whose write to the disk tier failed: why it is not on disk.
    std::optional<Error> not_on_disk{};
};

// What put() did: the entry as the memory tier holds it (decoded, as a hit would be; null for
// key material no entry can hold), and the disk write's outcome (ok without a disk tier).
struct Stored {
    std::shared_ptr<const VerifiedArtifact> entry;
    Result<void> disk;
};

class ArtifactStore {
public:
    // `disk` and `remote` may be null.
    ArtifactStore(std::size_t memory_bytes, std::unique_ptr<DiskStore> disk,
                  std::unique_ptr<remote::RemoteTier> remote = nullptr)
        : memory_(memory_bytes), disk_(std::move(disk)), remote_(std::move(remote)) {
        if (disk_ && remote_) start_refills();
        if (disk_ && !disk_->read_only()) start_writes();
    }
    // Compiles' entries and remote hits still to be written to disk are written first (local
    // writes: no server to wait for).
    ~ArtifactStore();

    // find(), then count() of how it ended: for a caller that takes whatever it finds.
    std::optional<Found> get(const util::Fingerprint& fingerprint);
    // The tiers' entry, counting no lookup: its finder may still reject it (key material), so
    // it says how the lookup ended with count(), once.
    std::optional<Found> find(const util::Fingerprint& fingerprint);
    enum class Outcome { kMemoryHit, kDiskHit, kRemoteHit, kMiss, kRejected };  // kRejected: a miss
    void count(Outcome outcome) noexcept;
    // A remote hit its finder accepted: written to the disk tier (or, without one, kept in
    // memory), so that the next lookup finds it here. The disk write is queued, off the caller's
    // path: a durable write costs more than the remote read did. A disk hit goes to the remote
    // backends that share disk hits again (`reshare`), off the caller's path too.
    void keep(const util::Fingerprint& fingerprint, const Found& found);
    // Waits until the remote hits queued for the disk are written (tests, `kcache pull`).
    void drain_refills();
    // The end of the process: the queued remote hits are written (within a bound), and the
    // queue's thread stops.
    void finish_refills();
    // The bytes of code loaded earlier without keeping them, for another context: find() without
    // counting a lookup; a success counts as a read-back. Null when no tier has the entry.
    std::shared_ptr<const VerifiedArtifact> read_back(const util::Fingerprint& fingerprint);
    // Puts to every tier. A disk failure is counted by the disk tier and returned; the artifact
    // is still in memory, so a caller loading it may ignore it, and a later memory hit of it
    // says it is not on disk.
    // The remote write is queued (off the caller's path), and `lease` released once it is sent.
    // kBehind queues the disk write too (DiskWriteQueue), where the queue has room: Stored::disk
    // is then ok(), and its outcome goes to `then`. `then`, if given, runs exactly once, when
    // the disk write ended (at once without a disk tier): on a writing thread when queued, else
    // before put() returns.
    enum class Writing { kNow, kBehind };
    Stored put(const util::Fingerprint& fingerprint, const Artifact& entry,
               DiskStore::Cleaning cleaning = DiskStore::Cleaning::kNow, remote::Lease lease = {},
               Writing writing = Writing::kNow,
               std::function<void(const Result<void>& written)> then = {});
    // Waits until the disk writes queued so far (kBehind) were written.
    void drain_writes();
    // drain_writes(), then why the entry under `fingerprint` is not on disk (nullopt if it is, as
    // far as this store wrote it): for a prebuild that found a lookup's compile in memory.
    std::optional<Error> once_written(const util::Fingerprint& fingerprint);
    // The end of the process: the queued disk writes are written (within a bound), and their
    // threads stop.
    void finish_writes();

    ArtifactStats stats() const;
    DiskStore* disk() const noexcept { return disk_.get(); }
    remote::RemoteTier* remote() const noexcept { return remote_.get(); }

private:
    void start_refills();
    void start_writes();
    std::optional<Error> why_not_on_disk(const util::Fingerprint& fingerprint) const;
    void note_disk_write(const util::Fingerprint& fingerprint, const Result<void>& written);

    MemoryStore memory_;
    std::unique_ptr<DiskStore> disk_;
    std::unique_ptr<remote::RemoteTier> remote_;
    // Remote hits on their way to the disk tier; null without both tiers. Last of the tiers:
    // its thread writes to disk_.
    std::unique_ptr<remote::UploadQueue> refills_;
    std::atomic<std::uint64_t> memory_hits_{0}, disk_hits_{0}, disk_misses_{0};
    std::atomic<std::uint64_t> disk_rejected_{0};
    std::atomic<std::uint64_t> read_backs_{0};
    // Fingerprints whose last disk write failed, and why: few (one per failed write), and only
    // looked at on a memory hit when there is any.
    mutable std::mutex unstored_mutex_;
    std::map<std::pair<std::uint64_t, std::uint64_t>, Error> unstored_;  // guarded by the mutex
    std::atomic<bool> any_unstored_{false};
    // Compiles' entries on their way to the disk tier; null without a writable disk tier. Last:
    // its threads use everything above, and are stopped first.
    std::unique_ptr<DiskWriteQueue> writes_;
};

}  // namespace kcache::store
