// SPDX-License-Identifier: Apache-2.0
// The disk tier: one file per fingerprint, $DIR/ab/cdef....kc, in the entry format. A bad entry
// is a miss (removed and counted); an I/O failure is counted and never reaches a launch as
// anything but a miss. The directory is kept within byte and file budgets, least recently used
// entries first, by store/disk_cleaner.hpp.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "kcache/result.hpp"
#include "store/artifact_format.hpp"
#include "store/cache_directory.hpp"
#include "store/disk_cleaner.hpp"
#include "util/file_lock.hpp"
#include "util/files.hpp"
#include "util/fingerprint.hpp"

namespace kcache::store {

// 4 GiB: tens of thousands of cubins of typical size (tens to hundreds of KiB), a small share
// of a developer's or a CI machine's disk.
inline constexpr std::uint64_t kDefaultMaxBytes = std::uint64_t{4} << 30;
// No limit on the number of entries: the byte budget already bounds the directory, and the
// number of files matters only on file systems short of inodes.
inline constexpr std::uint64_t kDefaultMaxFiles = 0;

// How stale an entry's recency stamp (its mtime) may get before a hit refreshes it. Eviction
// works on hours and days; a finer stamp would cost a metadata write on every warm start.
inline constexpr std::chrono::seconds kStampGranularity{600};

struct DiskOptions {
    std::string directory;                // empty: default_directory()
    bool allow_shared_directory = false;  // accept a group- or world-writable directory
    bool read_only = false;               // read from it, write nothing (see DirectoryPolicy)
    util::Files* files = nullptr;         // null: the real file system
    // Budgets for the entries in the directory, 0 for no limit. Kept by removing the least
    // recently used entries once a budget is exceeded (store/disk_cleaner.hpp).
    std::uint64_t max_bytes = kDefaultMaxBytes;
    std::uint64_t max_files = kDefaultMaxFiles;
};

struct DiskStats {
    std::uint64_t hits = 0;
    std::uint64_t misses = 0;
    std::uint64_t writes = 0;
    std::uint64_t errors = 0;         // I/O failures on read, write or cleanup
    std::uint64_t corrupt = 0;        // entries that failed to decode, removed
    std::uint64_t evicted = 0;        // entries removed by this process's cleanups
    std::uint64_t evicted_bytes = 0;  // their size
    std::uint64_t scans = 0;          // cleanup passes this process ran (dry runs too)
    std::uint64_t sampled = 0;        // first writes that trusted a sample instead of a pass
};

// KCACHE_DIR, else $XDG_CACHE_HOME/kcache, else $HOME/.cache/kcache; kIoError without any.
Result<std::string> default_directory();

class DiskStore {
public:
    // Creates the directory (mode 0700) if needed. A group- or world-writable directory is
    // refused, with the reason, unless allowed: anyone who can write there could plant a kernel.
    // See CacheDirectory::open for every check.
    static Result<std::unique_ptr<DiskStore>> open(const DiskOptions& options);
    // A store over a directory already accepted.
    static std::unique_ptr<DiskStore> over(std::shared_ptr<CacheDirectory> directory,
                                           std::uint64_t max_bytes, std::uint64_t max_files);

    // Why an entry is read: a lookup counts as a hit or miss; a read-back (the bytes of code
    // already loaded, for another context) counts neither, only errors and corrupt entries; so
    // does kUncounted, for a caller that counts the lookup itself (ArtifactStore: key material
    // may still reject what was read).
    enum class Reading { kLookup, kReadBack, kUncounted };
    // Null on a miss. A hit refreshes the entry's mtime, its recency stamp for eviction, when
    // older than kStampGranularity.
    std::shared_ptr<const VerifiedArtifact> get(const util::Fingerprint& fingerprint,
                                                Reading reading = Reading::kLookup);
    // After a successful write, cleans the directory when due: at this store's first write
    // (unless a sample of the directory shows a recent cleanup and room in its budgets: see
    // store/directory_sample.hpp's full_scan_due), then whenever it has written a tenth of a budget
    // since its last scan, or enough to take the directory that scan found over a budget. A failed
    // cleanup is counted and logged; it never fails the put. kDeferred leaves a due cleanup to
    // run_pending_cleanup(): a caller holding the entry's compile lock releases it first, so that
    // processes waiting on it do not wait on a scan.
    enum class Cleaning { kNow, kDeferred };
    Result<void> put(const util::Fingerprint& fingerprint, const Artifact& entry,
                     Cleaning cleaning = Cleaning::kNow);
    // The same for an entry already encoded (one the remote tier served, checked).
    Result<void> put_encoded(const util::Fingerprint& fingerprint, std::string_view bytes,
                             Cleaning cleaning = Cleaning::kNow);
    void run_pending_cleanup();

    // One cleanup pass, as asked (see store/disk_cleaner.hpp); skipped, never waited for, while
    // another process cleans, and in read-only mode. Removals are counted in stats() (not those
    // of a dry run).
    Result<CleanupReport> cleanup(const CleanupRequest& request);
    // A request for this store's own budgets.
    CleanupRequest budget_request() const;

    std::string path_of(const util::Fingerprint& fingerprint) const;
    // The same below the directory: "ab/cdef….kc".
    static std::string relative_path_of(const util::Fingerprint& fingerprint);
    // Serialises the compile of one artifact across processes (a lock file beside its entry).
    // nullopt when the lock cannot be had within `patience`: the caller compiles privately.
    std::optional<util::FileLock> lock(const util::Fingerprint& fingerprint,
                                       std::chrono::milliseconds patience);
    const std::string& directory() const noexcept { return directory_->path(); }
    const std::shared_ptr<CacheDirectory>& cache_directory() const noexcept { return directory_; }
    bool read_only() const noexcept { return directory_->read_only(); }
    DiskStats stats() const;

private:
    DiskStore(std::shared_ptr<CacheDirectory> directory, std::uint64_t max_bytes,
              std::uint64_t max_files)
        : directory_(std::move(directory)), max_bytes_(max_bytes), max_files_(max_files) {}

    // Counts a write; true when a cleanup is due (see put()).
    bool cleanup_due(std::uint64_t bytes_written);
    // At the first write: true when a sample of the directory may stand in for a full scan; its
    // estimate is then the size known.
    bool trust_sample();
    void run_due_cleanup();

    // Every file is reached below the directory it holds; a write that finds the directory
    // replaced at its path (removed and made again) moves lookups to the new one.
    const std::shared_ptr<CacheDirectory> directory_;
    const std::uint64_t max_bytes_;
    const std::uint64_t max_files_;
    std::atomic<std::uint64_t> hits_{0}, misses_{0}, writes_{0}, errors_{0}, corrupt_{0};
    std::atomic<std::uint64_t> evicted_{0}, evicted_bytes_{0}, scans_{0}, sampled_{0};
    // What this store has written since its last scan, and what that scan left in the directory,
    // to tell when the next is due. Relaxed, like the flag: a scan that starts a few writes early
    // or late is harmless. The known_ pair is written under cleaning_, or by the first write's
    // sample.
    std::atomic<std::uint64_t> bytes_since_scan_{0}, files_since_scan_{0};
    std::atomic<std::uint64_t> known_bytes_{0}, known_files_{0};
    std::atomic<bool> scanned_{false};
    std::atomic<bool> cleanup_pending_{false};  // a deferred put found a cleanup due
    // Held by the thread running this store's automatic cleanup; another thread whose write makes
    // one due meanwhile skips it rather than wait or scan twice. Guards no data.
    std::mutex cleaning_;
};

}  // namespace kcache::store
