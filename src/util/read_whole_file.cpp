// SPDX-License-Identifier: Apache-2.0
#include "util/read_whole_file.hpp"

#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <new>
#include <string>
#include <utility>

#include "util/spare_buffer.hpp"

namespace kcache::util {
namespace {

const char* kind_word(mode_t mode) {
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISLNK(mode)) return "a symbolic link";
    if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

// Whether a file may be mapped (Files::read_bytes): this user's, writable by no one else, on
// a file system of this machine's own.
bool may_map(int fd, const struct stat& info) {
    constexpr unsigned long kZfsMagic = 0x2fc12fc1;  // not in <linux/magic.h>
    if (info.st_uid != geteuid() || (info.st_mode & (S_IWGRP | S_IWOTH)) != 0) return false;
    struct statfs where {};
    if (fstatfs(fd, &where) != 0) return false;
    switch (static_cast<unsigned long>(where.f_type)) {
        case EXT4_SUPER_MAGIC:  // ext2, ext3 and ext4 alike
        case XFS_SUPER_MAGIC:
        case BTRFS_SUPER_MAGIC:
        case TMPFS_MAGIC:
        case OVERLAYFS_SUPER_MAGIC:
        case F2FS_SUPER_MAGIC:
        case kZfsMagic:
            return true;
        default:
            return false;  // NFS, SMB, FUSE and whatever else: read
    }
}

}  // namespace

Result<std::optional<FileBytes>> read_whole_file(UniqueFd fd, const OpenDirectory& base,
                                                 std::string_view relative, std::uint64_t max_bytes,
                                                 std::chrono::seconds stamp_after,
                                                 const Writers* writers, std::uint64_t map_from) {
    struct stat info {};
    if (fstat(fd.get(), &info) != 0) {
        const int saved = errno;
        return io_error("stat", base.path_of(relative), saved);
    }
    if (!S_ISREG(info.st_mode)) {
        return Error(Errc::kCorruptEntry, base.path_of(relative) + " is " +
                                              kind_word(info.st_mode) +
                                              ", not a regular file; not read");
    }
    if (writers != nullptr) {
        // A file someone else wrote, or may rewrite, is none of this directory's: whoever
        // can write it can plant what kcache would load.
        const bool owner_ok =
            info.st_uid == writers->user || (writers->root_too && info.st_uid == 0);
        if (!owner_ok || (info.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
            return Error(Errc::kCorruptEntry,
                         base.path_of(relative) +
                             (owner_ok ? " is writable by others" : " belongs to another user") +
                             "; not read");
        }
    }
    const auto size = static_cast<std::uint64_t>(info.st_size);
    if (size > max_bytes) {
        return Error(Errc::kCorruptEntry, base.path_of(relative) + " holds " +
                                              std::to_string(size) + " bytes, more than the " +
                                              std::to_string(max_bytes) +
                                              " such a file may; not read");
    }
    const auto stamp = [&] {
        if (stamp_after.count() >= 0 &&
            std::chrono::system_clock::now() - time_of(info.st_mtim) > stamp_after) {
            const struct timespec times[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
            (void)futimens(fd.get(), times);  // ignored on purpose: see Files::read
        }
    };
    if (map_from > 0 && size >= map_from && may_map(fd.get(), info)) {
        // A mapping refused (no address space or mapping left, say) is read instead.
        auto mapped =
            FileBytes::map(fd.get(), static_cast<std::size_t>(size), base.path_of(relative));
        if (mapped) {
            stamp();
            return std::optional<FileBytes>(std::move(*mapped));
        }
    }
    // One read of the size fstat gave, into a string allocated once: files here are
    // replaced by rename, never grown in place. A short read (a file cut meanwhile) loops
    // until that size or EOF. Into this thread's spare buffer when it has one (see
    // spare_buffer.hpp): a new process reading entry after entry between driver loads then
    // faults no fresh pages in.
    std::string out;
    try {
        out = take_spare_buffer();
        out.resize(static_cast<std::size_t>(size));
    } catch (const std::bad_alloc&) {
        return Error(Errc::kIoError, "no memory to read " + std::to_string(size) + " bytes of " +
                                         base.path_of(relative));
    }
    std::size_t done = 0;
    while (done < out.size()) {
        const ssize_t n = ::read(fd.get(), out.data() + done, out.size() - done);
        if (n < 0) {
            if (errno == EINTR) continue;
            const int saved = errno;
            return io_error("read", base.path_of(relative), saved);
        }
        if (n == 0) break;
        done += static_cast<std::size_t>(n);
    }
    out.resize(done);
    stamp();
    return std::optional<FileBytes>(FileBytes(std::move(out)));
}

}  // namespace kcache::util
