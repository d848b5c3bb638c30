// The disk tier: one file per fingerprint, $DIR/ab/cdef....kc, in the entry format. A bad entry
// is a miss (removed and counted); an I/O failure is counted and never reaches a launch as
// anything but a miss.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "kcache/result.hpp"
#include "store/entry_format.hpp"
#include "util/file_lock.hpp"
#include "util/files.hpp"
#include "util/fingerprint.hpp"

namespace kcache::store {

struct DiskOptions {
    std::string directory;                // empty: default_directory()
    bool allow_shared_directory = false;  // accept a group- or world-writable directory
    util::Files* files = nullptr;         // null: the real file system
};

struct DiskStats {
    std::uint64_t hits = 0;
    std::uint64_t misses = 0;
    std::uint64_t writes = 0;
    std::uint64_t errors = 0;   // I/O failures on read or write
    std::uint64_t corrupt = 0;  // entries that failed to decode, removed
};

// KCACHE_DIR, else $XDG_CACHE_HOME/kcache, else $HOME/.cache/kcache; kIoError without any.
Result<std::string> default_directory();

class DiskStore {
public:
    // Creates the directory (mode 0700) if needed. A group- or world-writable directory is
    // refused, with the reason, unless allowed: anyone who can write there could plant a kernel.
    static Result<std::unique_ptr<DiskStore>> open(const DiskOptions& options);

    std::optional<StoredEntry> get(const util::Fingerprint& fingerprint);
    Result<void> put(const util::Fingerprint& fingerprint, const StoredEntry& entry);

    std::string path_of(const util::Fingerprint& fingerprint) const;
    // Serialises the compile of one artifact across processes (a lock file beside its entry).
    // nullopt when the lock cannot be had within `patience`: the caller compiles privately.
    std::optional<util::FileLock> lock(const util::Fingerprint& fingerprint,
                                       std::chrono::milliseconds patience);
    const std::string& directory() const noexcept { return directory_; }
    DiskStats stats() const;

private:
    DiskStore(std::string directory, util::Files& files)
        : directory_(std::move(directory)), files_(files) {}

    const std::string directory_;
    util::Files& files_;
    std::atomic<std::uint64_t> hits_{0}, misses_{0}, writes_{0}, errors_{0}, corrupt_{0};
};

}  // namespace kcache::store
