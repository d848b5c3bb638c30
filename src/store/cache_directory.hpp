// SPDX-License-Identifier: Apache-2.0
// The cache directory: accepted (owner, mode, links) before anything in it is read, then held
// open, and the one way every part of kcache reaches a file in it (the disk tier, its cleaner
// and catalog, the key index, the persistent statistics, kcache.conf), so that no part walks a
// path that a planted link could redirect and a fault injected into the file seam reaches all.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kcache/result.hpp"
#include "util/file_lock.hpp"
#include "util/files.hpp"

namespace kcache::store {

// The most kcache reads of one entry: far above any real cubin or fatbin (tens of MiB), far
// below what would exhaust memory when a huge file or a device is planted at an entry's name.
inline constexpr std::uint64_t kMaxEntryBytes = std::uint64_t{256} << 20;
// An entry at least this large is mapped rather than read, where Files::read_bytes allows: a
// bundle's is mostly fresh pages to fault in and zero, then a copy; below this a read into the
// thread's spare buffer costs less than a mapping's setup and removal (docs/performance.md).
inline constexpr std::uint64_t kMapEntryFrom = std::uint64_t{128} << 10;
// The most it reads of kcache.conf, a statistics shard or a key-index record.
inline constexpr std::uint64_t kMaxSmallFileBytes = std::uint64_t{1} << 20;

// What a directory must be to be used. The fields that relax a check come from the environment
// or the command line only, never from a file inside the directory (util/config).
struct DirectoryPolicy {
    // Accept a group- or world-writable directory, or one owned by another user.
    bool allow_shared = false;
    // Read only: also accept a directory owned by root that others cannot write (a cache baked
    // into an image), and write nothing to it.
    bool read_only = false;
    // Make the directory (mode 0700, and its missing parents) when it is not there. Never in
    // read-only mode.
    bool create = true;
};

class CacheDirectory;

// One folder of the cache directory, held open for a pass over its files (the cleaner's scan and
// removals, the catalog's listing): each call on a name in it is one system call on the folder's
// descriptor, not a walk from the top (two more: open the folder, close it). Names are single
// path parts; the directory's policy holds as for its own calls (no removal when read only,
// reads held to its writers). Valid while its directory lives.
class CacheFolder {
public:
    // "ab": the folder, relative to the cache directory.
    const std::string& relative() const noexcept { return relative_; }
    // "ab/<name>", for messages and for the directory's own calls.
    std::string relative_of(std::string_view name) const;
    std::string path_of(std::string_view name) const { return held_.path_of(name); }
    const util::OpenDirectory& held() const noexcept { return held_; }

    Result<std::vector<std::string>> list() const;
    Result<std::optional<util::FileStatus>> status(std::string_view name) const;
    Result<std::optional<std::string>> read(std::string_view name, std::uint64_t max_bytes) const;
    Result<void> remove(std::string_view name) const;

private:
    friend class CacheDirectory;
    CacheFolder(const CacheDirectory& directory, std::string relative, util::OpenDirectory held)
        : directory_(&directory), relative_(std::move(relative)), held_(std::move(held)) {}

    const CacheDirectory* directory_;
    std::string relative_;
    util::OpenDirectory held_;
};

class CacheDirectory {
public:
    // Accepts `path` or says why not. Its last part may be a symbolic link the user (or root)
    // owns, which is followed (`~/.cache/kcache` on a bigger disk); the directory it names is
    // checked, on the descriptor held, so nothing can swap it between the check and the use.
    static Result<std::shared_ptr<CacheDirectory>> open(std::string path, DirectoryPolicy policy,
                                                        util::Files& files = util::real_files());

    const std::string& path() const noexcept { return path_; }
    bool read_only() const noexcept { return policy_.read_only; }
    util::Files& files() const noexcept { return files_; }
    std::string path_of(std::string_view relative) const { return held().path_of(relative); }

    // The directory held now. A reference stays valid for the object's life: a directory
    // replaced at the path is held apart (check_replaced), never closed under a reader.
    const util::OpenDirectory& held() const noexcept {
        return *current_.load(std::memory_order_acquire);
    }

    // Who may have written what is read here: the user (and root, in read-only mode); null where
    // a shared directory is allowed.
    const util::Writers* writers() const noexcept {
        return policy_.allow_shared ? nullptr : &writers_;
    }

    // The Files operations below the directory held now (see util/files.hpp), reads held to
    // writers(). Writing ones fail in read-only mode, without touching the disk.
    Result<std::optional<std::string>> read(
        std::string_view relative, std::uint64_t max_bytes,
        std::chrono::seconds stamp_after = util::kNeverStamp) const;
    // Makes the folders on the way (mode 0700) first.
    Result<void> write_atomic(std::string_view relative, std::string_view bytes,
                              util::Durability durability = util::Durability::kSynced) const;
    Result<void> remove(std::string_view relative) const;
    Result<void> remove_tree(std::string_view relative) const;
    Result<void> make_directories(std::string_view relative) const;
    Result<std::vector<std::string>> list(std::string_view relative = {}) const;
    Result<std::optional<util::FileStatus>> status(std::string_view relative) const;
    // The folder at `relative` held open (not followed if it is a link: an error), for many
    // calls on the files in it.
    Result<CacheFolder> folder(std::string_view relative) const;
    // An advisory lock on the file `relative` (made if needed, with its folders): see
    // util::FileLock. nullopt when it cannot be had in time or in read-only mode.
    std::optional<util::FileLock> lock(std::string_view relative,
                                       std::chrono::milliseconds patience) const;
    // One attempt; nullopt when another process holds it; an error when it cannot be opened.
    Result<std::optional<util::FileLock>> try_lock(
        std::string_view relative,
        util::FileLock::IfSilent if_silent = util::FileLock::IfSilent::kKeep) const;

    // When the path now names another directory than the one held (removed and made again), the
    // new one is accepted by the same policy and held from now on; true if that happened. With
    // `make`, a directory removed and not made again is made (mode 0700), unless read only.
    bool check_replaced(bool make = false);

    // "read-only cache directory <path>": the error of a write in read-only mode.
    Error read_only_error() const;

private:
    CacheDirectory(std::string path, DirectoryPolicy policy, util::Files& files,
                   std::unique_ptr<util::OpenDirectory> held);
    Result<util::OpenDirectory> parent_of(std::string_view relative, std::string& name) const;

    const std::string path_;
    const DirectoryPolicy policy_;
    const util::Writers writers_;
    util::Files& files_;
    std::atomic<const util::OpenDirectory*> current_;
    mutable std::mutex replaced_mutex_;
    std::vector<std::unique_ptr<util::OpenDirectory>> held_;  // guarded by replaced_mutex_
};

// Why a directory's owner or mode is refused, or nothing: the checks of open() on a stat of it.
std::optional<std::string> refusal(const std::string& path, uid_t owner, mode_t mode,
                                   const DirectoryPolicy& policy, uid_t user);

}  // namespace kcache::store
