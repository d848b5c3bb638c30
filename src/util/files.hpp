// The file operations the stores need, behind an interface so that tests can make them fail the
// way real disks do (full, read-only) without needing such a disk.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kcache/result.hpp"

namespace kcache::util {

// Symbolic links are kOther: status() does not follow them, so that a link planted in the cache
// directory cannot lead the cleaner to delete files outside it.
enum class FileKind : std::uint8_t { kRegular, kDirectory, kOther };

struct FileStatus {
    FileKind kind = FileKind::kOther;
    std::uint64_t size = 0;
    std::chrono::system_clock::time_point modified;
};

// Whether an atomic replace waits for the disk: kSynced fsyncs before the rename (a cache entry:
// after a crash it is the old file or the whole new one); kUnsynced skips that for files whose
// loss costs nothing but a note (the key index), sparing every compile a second fsync.
enum class Durability { kSynced, kUnsynced };

// A directory held open, so that a file below it is reached by walking only the path below it:
// a warm start reads one entry per kernel, and walking the cache directory's own path each time
// showed in its profile. Move-only; closes what it holds. It holds nothing (fd -1) where the file
// system cannot hold one (a test's fake): reads below it then go by the joined path.
class OpenDirectory {
public:
    OpenDirectory() = default;
    OpenDirectory(std::string path, int fd) noexcept : path_(std::move(path)), fd_(fd) {}
    ~OpenDirectory();
    OpenDirectory(OpenDirectory&& other) noexcept;
    OpenDirectory& operator=(OpenDirectory&& other) noexcept;
    OpenDirectory(const OpenDirectory&) = delete;
    OpenDirectory& operator=(const OpenDirectory&) = delete;

    const std::string& path() const noexcept { return path_; }
    int fd() const noexcept { return fd_; }
    // Whether its path still names the directory held, not one made in its place after it was
    // removed (one stat). True when it holds nothing.
    bool still_at_its_path() const noexcept;
    // Whether what it holds is the file `device` and `inode` (one fstat). True when it holds
    // nothing.
    bool holds(dev_t device, ino_t inode) const noexcept;

private:
    std::string path_;
    int fd_ = -1;
};

class Files {
public:
    virtual ~Files() = default;
    // Whole-file read; nullopt if the file does not exist, kIoError for any other failure.
    virtual Result<std::optional<std::string>> read(const std::string& path) = 0;
    // Atomic replace: writes a uniquely named temporary (host, pid, random) in the same folder,
    // fsyncs it (kSynced) and renames it over `path`. Readers see the old file or the new one,
    // never a part. The temporary is removed on any failure.
    virtual Result<void> write_atomic(const std::string& path, std::string_view bytes,
                                      Durability durability = Durability::kSynced) = 0;
    virtual Result<void> remove(const std::string& path) = 0;
    // mkdir -p with `mode` for what it creates.
    virtual Result<void> make_directories(const std::string& path, mode_t mode) = 0;
    // The names in a directory, without "." and "..", in no particular order.
    virtual Result<std::vector<std::string>> list_directory(const std::string& path) = 0;
    // lstat: nullopt if the path does not exist (a file that vanished between a listing and this
    // call is normal where other processes write and clean), kIoError for any other failure.
    virtual Result<std::optional<FileStatus>> status(const std::string& path) = 0;
    // Sets the file's modification time to now, leaving its access time alone. The mtime is
    // kcache's recency stamp: atime cannot be relied on (noatime and relatime mounts).
    virtual Result<void> touch(const std::string& path) = 0;
    // read(), then a touch() when the stamp is older than `stale_after`; a failed touch is
    // ignored (a directory we may read but not change still serves hits). The real file system
    // does both on one open file and skips fresh stamps: a warm start reads many entries, and a
    // path walk plus a metadata write per entry showed in its profile.
    virtual Result<std::optional<std::string>> read_and_stamp(const std::string& path,
                                                              std::chrono::seconds stale_after);
    // Holds `path`, a directory, open for read_and_stamp_below(); a directory that cannot be
    // opened gives one that holds nothing. The real file system's is the only one held.
    virtual OpenDirectory open_directory(const std::string& path);
    // read_and_stamp() of `relative` below `directory`; errors name the whole path.
    virtual Result<std::optional<std::string>> read_and_stamp_below(
        const OpenDirectory& directory, const std::string& relative,
        std::chrono::seconds stale_after);
};

// The real file system.
Files& real_files();

// errno as a kIoError: "<what> <path>: <strerror>".
Error io_error(const std::string& what, const std::string& path, int error_number);

}  // namespace kcache::util
