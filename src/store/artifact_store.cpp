// SPDX-License-Identifier: Apache-2.0
#include "store/artifact_store.hpp"

#include <tuple>

namespace kcache::store {

std::optional<Found> ArtifactStore::get(const util::Fingerprint& fingerprint) {
    auto found = find(fingerprint);
    Outcome outcome = Outcome::kMiss;
    if (found) {
        outcome = found->tier == Tier::kMemory ? Outcome::kMemoryHit
                  : found->tier == Tier::kDisk ? Outcome::kDiskHit
                                               : Outcome::kRemoteHit;
        keep(fingerprint, *found);
    }
    count(outcome);
    return found;
}

std::optional<Found> ArtifactStore::find(const util::Fingerprint& fingerprint) {
    if (auto entry = memory_.get(fingerprint)) {
        return Found{std::move(entry), Tier::kMemory, why_not_on_disk(fingerprint)};
    }
    if (disk_) {
        // Not copied up to memory: a disk hit is loaded at once and the driver keeps what it
        // needs, and holding every hit's bytes would cost a new process first touches of fresh
        // memory for every kernel (docs/performance.md). A later find reads the disk again, from
        // the page cache.
        if (auto entry = disk_->get(fingerprint, DiskStore::Reading::kUncounted)) {
            return Found{std::move(entry), Tier::kDisk};
        }
    }
    if (remote_) {
        if (auto entry = remote_->get(fingerprint)) return Found{std::move(entry), Tier::kRemote};
    }
    return std::nullopt;
}

namespace {

// Remote hits waiting for the disk: a warm-up's worth; beyond, a hit is not kept (the next
// process asks the remote tier again).
constexpr std::size_t kMaxRefills = 4096;
constexpr std::uint64_t kMaxRefillBytes = std::uint64_t{1} << 30;

// Compiles' entries waiting for the disk: a warm-up's worth; a write that does not fit is made
// by its compiling thread. A few threads, since a durable write waits on the disk.
constexpr std::size_t kMaxWrites = 4096;
constexpr std::uint64_t kMaxWriteBytes = std::uint64_t{1} << 30;
constexpr unsigned kWriteThreads = 4;

}  // namespace

void ArtifactStore::start_refills() {
    // Fails open: a disk that cannot take it leaves the lookup served, and the next one asks the
    // remote tier again. The disk tier counts and warns of its own failures.
    refills_ = std::make_unique<remote::UploadQueue>(
        [this](const remote::Upload& refill) {
            return disk_->put_encoded(refill.fingerprint, refill.entry).ok();
        },
        kMaxRefills, kMaxRefillBytes);
}

void ArtifactStore::start_writes() {
    writes_ = std::make_unique<DiskWriteQueue>(
        [this](const DiskWrite& write) {
            return disk_->put_encoded(write.fingerprint, write.entry->encoded(),
                                      DiskStore::Cleaning::kDeferred);
        },
        kWriteThreads, kMaxWrites, kMaxWriteBytes);
}

ArtifactStore::~ArtifactStore() {
    finish_writes();
    finish_refills();
}

void ArtifactStore::drain_writes() {
    if (writes_) writes_->drain();
}

std::optional<Error> ArtifactStore::once_written(const util::Fingerprint& fingerprint) {
    drain_writes();
    return why_not_on_disk(fingerprint);
}

void ArtifactStore::finish_writes() {
    // Local writes: a generous bound, only so that a stuck disk cannot hold the end for ever.
    if (writes_) writes_->finish(std::chrono::seconds(60));
}

void ArtifactStore::finish_refills() {
    // Local writes, each quick: a generous bound, only so that a stuck disk cannot hold the end.
    if (refills_) refills_->finish(std::chrono::seconds(10));
}

void ArtifactStore::keep(const util::Fingerprint& fingerprint, const Found& found) {
    if (found.tier == Tier::kDisk && remote_ && remote_->reshares()) {
        remote_->reshare(fingerprint, found.entry->encoded());
    }
    if (found.tier != Tier::kRemote) return;
    if (!disk_) {
        memory_.put(fingerprint, found.entry);
        return;
    }
    if (disk_->read_only()) return;
    refills_->push({fingerprint, std::string(found.entry->encoded()), false, {}});
}

void ArtifactStore::drain_refills() {
    if (refills_) refills_->drain();
}

void ArtifactStore::count(Outcome outcome) noexcept {
    switch (outcome) {
        case Outcome::kMemoryHit:
            memory_hits_.fetch_add(1, std::memory_order_relaxed);
            return;
        case Outcome::kDiskHit:
            disk_hits_.fetch_add(1, std::memory_order_relaxed);
            return;
        case Outcome::kRemoteHit:
            // A miss of the disk tier that the remote one served.
            if (disk_) disk_misses_.fetch_add(1, std::memory_order_relaxed);
            remote_->count_lookup(true);
            return;
        case Outcome::kRejected:
            if (disk_) disk_rejected_.fetch_add(1, std::memory_order_relaxed);
            [[fallthrough]];
        case Outcome::kMiss:
            // Without a disk tier a miss is only the memory tier's, which no counter shows.
            if (disk_) disk_misses_.fetch_add(1, std::memory_order_relaxed);
            if (remote_) remote_->count_lookup(false);
            return;
    }
}

std::shared_ptr<const VerifiedArtifact> ArtifactStore::read_back(
    const util::Fingerprint& fingerprint) {
    auto entry = memory_.get(fingerprint);
    if (!entry && disk_) entry = disk_->get(fingerprint, DiskStore::Reading::kReadBack);
    if (!entry && remote_) entry = remote_->get(fingerprint);
    if (entry) read_backs_.fetch_add(1, std::memory_order_relaxed);
    return entry;
}

Stored ArtifactStore::put(const util::Fingerprint& fingerprint, const Artifact& entry,
                          DiskStore::Cleaning cleaning, remote::Lease lease, Writing writing,
                          std::function<void(const Result<void>& written)> then) {
    // A compile's entry, once through the entry format: what a disk hit would have kept, and the
    // bytes the disk and remote tiers store.
    auto decoded = VerifiedArtifact::of(entry);
    memory_.put(fingerprint, decoded);
    if (remote_ && decoded) {
        remote_->put(fingerprint, std::string(decoded->encoded()), std::move(lease));
    }
    if (!disk_) {
        if (then) then(ok());
        return {std::move(decoded), ok()};
    }
    std::function<void(const Result<void>&)> done =
        [this, fingerprint, then = std::move(then)](const Result<void>& written) {
            note_disk_write(fingerprint, written);
            if (then) then(written);
        };
    if (writing == Writing::kBehind && decoded && writes_) {
        DiskWrite write{fingerprint, decoded, std::move(done)};
        if (writes_->push(write)) return {std::move(decoded), ok()};
        done = std::move(write.then);  // refused, untouched: written here
    }
    Result<void> written = decoded ? disk_->put_encoded(fingerprint, decoded->encoded(), cleaning)
                                   : disk_->put(fingerprint, entry, cleaning);
    done(written);
    return {std::move(decoded), std::move(written)};
}

void ArtifactStore::note_disk_write(const util::Fingerprint& fingerprint,
                                    const Result<void>& written) {
    const std::pair key{fingerprint.high, fingerprint.low};
    std::lock_guard lock(unstored_mutex_);
    if (written) {
        unstored_.erase(key);
    } else {
        unstored_.insert_or_assign(key, written.error());
    }
    any_unstored_.store(!unstored_.empty(), std::memory_order_relaxed);
}

std::optional<Error> ArtifactStore::why_not_on_disk(const util::Fingerprint& fingerprint) const {
    if (!any_unstored_.load(std::memory_order_relaxed)) return std::nullopt;
    std::lock_guard lock(unstored_mutex_);
    const auto it = unstored_.find({fingerprint.high, fingerprint.low});
    if (it == unstored_.end()) return std::nullopt;
    return it->second;
}

ArtifactStats ArtifactStore::stats() const {
    ArtifactStats s;
    s.memory_hits = memory_hits_.load(std::memory_order_relaxed);
    s.read_backs = read_backs_.load(std::memory_order_relaxed);
    s.memory_entries = memory_.size();
    s.memory_bytes = memory_.bytes();
    s.disk_enabled = disk_ != nullptr;
    if (disk_) {
        s.disk = disk_->stats();
        // The disk tier reads uncounted for this store (see find()): lookups are counted here.
        s.disk.hits = disk_hits_.load(std::memory_order_relaxed);
        s.disk.misses = disk_misses_.load(std::memory_order_relaxed);
        s.disk_rejected = disk_rejected_.load(std::memory_order_relaxed);
    }
    s.remote_enabled = remote_ != nullptr;
    if (remote_) s.remote = remote_->stats();
    return s;
}

}  // namespace kcache::store
