// SPDX-License-Identifier: Apache-2.0
// The file operations the stores need, each below a directory held open and never following a
// symbolic link, behind an interface so that tests can make them fail the way real disks do
// (full, read-only) without needing such a disk.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kcache/result.hpp"
#include "util/file_bytes.hpp"
#include "util/open_directory.hpp"

namespace kcache::util {

// What a name below a held directory is. A symbolic link is kOther: nothing here follows one.
enum class FileKind : std::uint8_t { kRegular, kDirectory, kOther };

struct FileStatus {
    FileKind kind = FileKind::kOther;
    std::uint64_t size = 0;
    std::chrono::system_clock::time_point modified;
    uid_t owner = 0;
    mode_t mode = 0;  // permission bits and file type, as stat gives them
};

// Whether an atomic replace waits for the disk: kSynced fsyncs before the rename (a cache entry:
// after a crash it is the old file or the whole new one); kUnsynced skips that for files whose
// loss costs nothing but a note (the key index), sparing every compile a second fsync.
enum class Durability { kSynced, kUnsynced };

// How deep remove_tree() goes: a folder at one of kcache's names is a mistake, not an archive.
inline constexpr int kMaxTreeDepth = 8;

// Who may have written a file that is read: it must be owned by `user` (or by root, with
// `root_too`) and writable by no one else (no group or world write bit).
struct Writers {
    uid_t user = 0;
    bool root_too = false;
};

// A read that never refreshes the file's modification time.
inline constexpr std::chrono::seconds kNeverStamp{-1};

// Every `relative` is a path below `base` such as "ab/cdef.kc" or "stats/0": not empty, no
// leading '/', no "." or ".." part (kInvalidArgument otherwise). No symbolic link is followed at
// any level: a link on the way is an error; a link at the last level is reported as kOther by
// status() and removed itself by remove().
class Files {
public:
    virtual ~Files() = default;

    // Holds `path`, which must be a directory; a symbolic link as its last part is not followed
    // (store::CacheDirectory follows the links the user set first). kIoError if it is not a
    // directory or cannot be opened.
    virtual Result<OpenDirectory> open_directory(const std::string& path) = 0;

    // Whole-file read: nullopt if nothing is there; kCorruptEntry if what is there is not a
    // regular file (a FIFO, a device, a directory, a link) or is larger than `max_bytes`, which
    // is checked before anything is read or allocated, or, with `writers`, one that others may
    // have written; kIoError for any other failure, an allocation that fails included. With
    // `stamp_after` >= 0 the file's modification time is set to now if it is older than that
    // (ignored if that fails: a directory we may read but not change still serves hits).
    virtual Result<std::optional<std::string>> read(const OpenDirectory& base,
                                                    std::string_view relative,
                                                    std::uint64_t max_bytes,
                                                    std::chrono::seconds stamp_after,
                                                    const Writers* writers = nullptr) = 0;
    // read(), but a file of at least `map_from` bytes may come mapped rather than copied
    // (FileBytes): one owned by this process's user, writable by no one else, on a local file
    // system. A mapped file cut short under the mapping would kill the process (SIGBUS) when the
    // bytes past its new end were read; kcache replaces its files, never cuts them, and only
    // their owner or root could, while a network file system may drop the pages of a file
    // another machine removed. The checks and errors are read()'s; a mapping refused is read.
    // This default reads: a Files that only overrides read() never maps.
    virtual Result<std::optional<FileBytes>> read_bytes(
        const OpenDirectory& base, std::string_view relative, std::uint64_t max_bytes,
        std::chrono::seconds stamp_after, const Writers* writers, std::uint64_t map_from);
    // Atomic replace: writes a uniquely named temporary (`<name>.tmp.<host>.<pid>.<random>`) in
    // the same folder, fsyncs it (kSynced) and renames it over `relative`. Readers see the old
    // file or the new one, never a part. The temporary is removed on any failure.
    virtual Result<void> write_atomic(const OpenDirectory& base, std::string_view relative,
                                      std::string_view bytes, Durability durability) = 0;
    // Removes the file or link at `relative` (nothing there is no error); a directory there is
    // kInvalidArgument and stays, so that a name that became a folder meanwhile is not emptied.
    virtual Result<void> remove(const OpenDirectory& base, std::string_view relative) = 0;
    // Removes whatever is at `relative`, a directory with everything in it, walked without
    // following links, at most kMaxTreeDepth levels deep.
    virtual Result<void> remove_tree(const OpenDirectory& base, std::string_view relative) = 0;
    // mkdir -p below `base` with `mode` for what it creates; an existing part that is not a
    // directory (a link included) is kIoError.
    virtual Result<void> make_directories(const OpenDirectory& base, std::string_view relative,
                                          mode_t mode) = 0;
    // The names in the directory at `relative` ("" for `base` itself), without "." and "..", in
    // no particular order.
    virtual Result<std::vector<std::string>> list_directory(const OpenDirectory& base,
                                                            std::string_view relative) = 0;
    // lstat: nullopt if nothing is there (a file that vanished between a listing and this call
    // is normal where other processes write and clean), kIoError for any other failure.
    virtual Result<std::optional<FileStatus>> status(const OpenDirectory& base,
                                                     std::string_view relative) = 0;
    // Sets the file's modification time to now, leaving its access time alone. The mtime is
    // kcache's recency stamp: atime cannot be relied on (noatime and relatime mounts).
    virtual Result<void> touch(const OpenDirectory& base, std::string_view relative) = 0;
    // Holds the directory at `relative` ("" for `base` itself), as a base for further calls or
    // for a lock file's descriptor.
    virtual Result<OpenDirectory> open_below(const OpenDirectory& base,
                                             std::string_view relative) = 0;
};

// The real file system.
Files& real_files();

// A file time as the system clock holds it, clamped to the years it can count.
std::chrono::system_clock::time_point time_of(const struct timespec& when);

// A file the user named (a source to compile, say), read whole by its path as given, links
// followed. nullopt if it does not exist; kIoError if it is larger than `max_bytes` or unreadable.
Result<std::optional<std::string>> read_named_file(const std::string& path,
                                                   std::uint64_t max_bytes);

// errno as a kIoError: "<what> <path>: <strerror>".
Error io_error(const std::string& what, const std::string& path, int error_number);

// Whether `relative` is a path Files accepts (see above).
bool is_relative_below(std::string_view relative) noexcept;

}  // namespace kcache::util
