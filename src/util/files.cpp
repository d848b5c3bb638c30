// SPDX-License-Identifier: Apache-2.0
// The real file system below a held directory: every level opened with openat() from the held
// descriptor, no symbolic link followed, only regular files of a bounded size read.
#include "util/files.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <new>
#include <random>
#include <utility>

#include "util/beneath.hpp"
#include "util/read_whole_file.hpp"
#include "util/unique_fd.hpp"

namespace kcache::util {
namespace {

std::string temporary_name(std::string_view name) {
    char host[64] = "host";
    (void)gethostname(host, sizeof host - 1);
    thread_local std::mt19937_64 random(std::random_device{}());
    std::string temp(name);
    temp += ".tmp.";
    temp += host;
    temp += '.';
    temp += std::to_string(getpid());
    temp += '.';
    temp += std::to_string(random());
    return temp;
}

}  // namespace

std::chrono::system_clock::time_point time_of(const struct timespec& when) {
    // Nanoseconds since 1970 overflow 64 bits past the year 2262: a stamp anyone can set (touch
    // -d 3000-01-01) is held to the years the clock can count, never wrapped.
    constexpr std::int64_t kLimit = std::int64_t{250} * 366 * 24 * 3600;
    const std::int64_t seconds = std::clamp<std::int64_t>(when.tv_sec, -kLimit, kLimit);
    return std::chrono::system_clock::time_point(
        std::chrono::duration_cast<std::chrono::system_clock::duration>(
            std::chrono::seconds(seconds) + std::chrono::nanoseconds(when.tv_nsec)));
}

namespace {

FileStatus status_of(const struct stat& info) {
    FileStatus out;
    out.kind = S_ISREG(info.st_mode)   ? FileKind::kRegular
               : S_ISDIR(info.st_mode) ? FileKind::kDirectory
                                       : FileKind::kOther;
    out.size = static_cast<std::uint64_t>(info.st_size);
    out.modified = time_of(info.st_mtim);
    out.owner = info.st_uid;
    out.mode = info.st_mode;
    return out;
}

struct DirectoryStreamCloser {
    void operator()(DIR* stream) const noexcept { (void)closedir(stream); }
};
// A directory being read: it owns the descriptor it was opened from.
using DirectoryStream = std::unique_ptr<DIR, DirectoryStreamCloser>;

// nullptr with errno if fdopendir fails, `fd` closed either way.
DirectoryStream stream_of(UniqueFd fd) {
    DirectoryStream stream(fdopendir(fd.get()));
    if (stream) (void)fd.release();
    return stream;
}

// Removes what `fd`'s `name` is, a directory with everything below it (to `depth` more levels),
// never through a link.
Result<void> remove_at(int fd, const std::string& name, const std::string& shown, int depth) {
    if (unlinkat(fd, name.c_str(), 0) == 0 || errno == ENOENT) return ok();
    if (errno != EISDIR && errno != EPERM) return io_error("remove", shown, errno);
    if (depth <= 0) {
        return Error(Errc::kIoError, "remove " + shown + ": folders nested too deep to remove");
    }
    UniqueFd folder(openat(fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!folder) return io_error("remove", shown, errno);
    const DirectoryStream dir = stream_of(std::move(folder));
    if (!dir) return io_error("remove", shown, errno);
    std::vector<std::string> names;
    while (const dirent* item = readdir(dir.get())) {
        const std::string_view entry = item->d_name;
        if (entry != "." && entry != "..") names.emplace_back(entry);
    }
    Result<void> result = ok();
    const std::string prefix = shown + "/";
    for (const std::string& entry : names) {
        if (auto removed = remove_at(dirfd(dir.get()), entry, prefix + entry, depth - 1);
            !removed && result) {
            result = removed;
        }
    }
    if (!result) return result;
    if (unlinkat(fd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
        return io_error("remove", shown, errno);
    }
    return ok();
}

class RealFiles final : public Files {
public:
    Result<OpenDirectory> open_directory(const std::string& path) override {
        // O_PATH: the directory is only ever a base for openat(), never read itself.
        UniqueFd fd(open(path.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (!fd) return io_error("open", path, errno);
        return OpenDirectory(path, std::move(fd));
    }

    Result<std::optional<std::string>> read(const OpenDirectory& base, std::string_view relative,
                                            std::uint64_t max_bytes,
                                            std::chrono::seconds stamp_after,
                                            const Writers* writers) override {
        auto bytes = read_bytes(base, relative, max_bytes, stamp_after, writers, 0);
        if (!bytes) return bytes.error();
        if (!*bytes) return std::optional<std::string>();
        return std::optional<std::string>(std::move(**bytes).take_text());
    }

    Result<std::optional<FileBytes>> read_bytes(const OpenDirectory& base,
                                                std::string_view relative, std::uint64_t max_bytes,
                                                std::chrono::seconds stamp_after,
                                                const Writers* writers,
                                                std::uint64_t map_from) override {
        if (!is_relative_below(relative)) return invalid_relative(relative);
        // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
        UniqueFd fd =
            open_beneath(base.fd(), std::string(relative), O_RDONLY | O_NONBLOCK | O_NOCTTY);
        if (!fd) {
            const int saved = errno;  // before path_of allocates
            if (saved == ENOENT) return std::optional<FileBytes>();
            if (saved == ELOOP) {
                return Error(Errc::kCorruptEntry, base.path_of(relative) +
                                                      " is or passes through a symbolic link, "
                                                      "which kcache does not follow");
            }
            return walk_error("open", base.path_of(relative), saved);
        }
        return read_whole_file(std::move(fd), base, relative, max_bytes, stamp_after, writers,
                               map_from);
    }

    Result<void> write_atomic(const OpenDirectory& base, std::string_view relative,
                              std::string_view bytes, Durability durability) override {
        Parent parent;
        if (const int failed = parent.open(base, relative)) {
            return parent_error(base, relative, failed);
        }
        const std::string temp = temporary_name(parent.name());
        UniqueFd fd(openat(parent.fd(), temp.c_str(),
                           O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
        const auto shown_temp = [&] {
            const std::size_t slash = relative.rfind('/');
            return base.path_of(slash == std::string_view::npos
                                    ? temp
                                    : std::string(relative.substr(0, slash + 1)) + temp);
        };
        if (!fd) return io_error("create", shown_temp(), errno);
        auto fail = [&](const char* what) {
            const int saved = errno;
            fd.reset();
            unlinkat(parent.fd(), temp.c_str(), 0);
            return io_error(what, shown_temp(), saved);
        };
        std::size_t done = 0;
        while (done < bytes.size()) {
            const ssize_t n = ::write(fd.get(), bytes.data() + done, bytes.size() - done);
            if (n < 0) {
                if (errno == EINTR) continue;
                return fail("write");
            }
            done += static_cast<std::size_t>(n);
        }
        if (durability == Durability::kSynced && fsync(fd.get()) != 0) return fail("fsync");
        if (const int saved = fd.close(); saved != 0) {
            unlinkat(parent.fd(), temp.c_str(), 0);
            return io_error("close", shown_temp(), saved);
        }
        // renameat replaces a link at the name itself, never what it points to.
        if (renameat(parent.fd(), temp.c_str(), parent.fd(), parent.name().c_str()) != 0) {
            const int saved = errno;
            unlinkat(parent.fd(), temp.c_str(), 0);
            return io_error("rename", base.path_of(relative), saved);
        }
        return ok();
    }

    Result<void> remove(const OpenDirectory& base, std::string_view relative) override {
        Parent parent;
        if (const int failed = parent.open(base, relative)) {
            // A folder on the way that is not there: nothing to remove below it.
            if (failed == ENOENT) return ok();
            return parent_error(base, relative, failed);
        }
        if (unlinkat(parent.fd(), parent.name().c_str(), 0) == 0 || errno == ENOENT) return ok();
        if (errno == EISDIR || errno == EPERM) {
            return Error(Errc::kInvalidArgument, "remove " + base.path_of(relative) +
                                                     ": a directory, not removed as a file");
        }
        return io_error("remove", base.path_of(relative), errno);
    }

    Result<void> remove_tree(const OpenDirectory& base, std::string_view relative) override {
        Parent parent;
        if (const int failed = parent.open(base, relative)) {
            if (failed == ENOENT) return ok();
            return parent_error(base, relative, failed);
        }
        return remove_at(parent.fd(), parent.name(), base.path_of(relative), kMaxTreeDepth);
    }

    Result<void> make_directories(const OpenDirectory& base, std::string_view relative,
                                  mode_t mode) override {
        if (!is_relative_below(relative)) return invalid_relative(relative);
        UniqueFd level;  // the level reached so far, when not `base` itself
        std::size_t start = 0;
        for (;;) {
            const std::size_t slash = relative.find('/', start);
            const std::string part(relative.substr(
                start, slash == std::string_view::npos ? std::string_view::npos : slash - start));
            const std::string shown = base.path_of(
                relative.substr(0, slash == std::string_view::npos ? relative.size() : slash));
            const int at = level ? level.get() : base.fd();
            if (mkdirat(at, part.c_str(), mode) != 0 && errno != EEXIST) {
                return io_error("mkdir", shown, errno);
            }
            UniqueFd next(openat(at, part.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
            if (!next) {
                const int saved = errno;
                if (saved == ENOTDIR || saved == ELOOP) {
                    return Error(Errc::kIoError, shown +
                                                     " is not a directory (a symbolic link or a "
                                                     "file is in its place)");
                }
                return io_error("open", shown, saved);
            }
            level = std::move(next);
            if (slash == std::string_view::npos) break;
            start = slash + 1;
        }
        return ok();
    }

    Result<std::vector<std::string>> list_directory(const OpenDirectory& base,
                                                    std::string_view relative) override {
        if (!relative.empty() && !is_relative_below(relative)) {
            return walk_error("list", base.path_of(relative), EINVAL);
        }
        UniqueFd fd = relative.empty()
                          ? UniqueFd(openat(base.fd(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC))
                          : open_beneath(base.fd(), std::string(relative), O_RDONLY | O_DIRECTORY);
        if (!fd) return walk_error("list", base.path_of(relative), errno);
        const DirectoryStream dir = stream_of(std::move(fd));
        if (!dir) return io_error("list", base.path_of(relative), errno);
        std::vector<std::string> names;
        for (;;) {
            // readdir signals an error only through errno, so it is cleared before each call.
            errno = 0;
            const dirent* item = readdir(dir.get());
            if (item == nullptr) break;
            const std::string_view name = item->d_name;
            if (name != "." && name != "..") names.emplace_back(name);
        }
        if (const int saved = errno; saved != 0)
            return io_error("list", base.path_of(relative), saved);
        return names;
    }

    Result<std::optional<FileStatus>> status(const OpenDirectory& base,
                                             std::string_view relative) override {
        Parent parent;
        if (const int failed = parent.open(base, relative)) {
            if (failed == ENOENT) return std::optional<FileStatus>();
            return parent_error(base, relative, failed);
        }
        struct stat info {};
        if (fstatat(parent.fd(), parent.name().c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0) {
            if (errno == ENOENT) return std::optional<FileStatus>();
            return io_error("stat", base.path_of(relative), errno);
        }
        return std::optional<FileStatus>(status_of(info));
    }

    Result<void> touch(const OpenDirectory& base, std::string_view relative) override {
        Parent parent;
        if (const int failed = parent.open(base, relative)) {
            return parent_error(base, relative, failed);
        }
        const timespec times[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
        if (utimensat(parent.fd(), parent.name().c_str(), times, AT_SYMLINK_NOFOLLOW) != 0) {
            return io_error("touch", base.path_of(relative), errno);
        }
        return ok();
    }

    Result<OpenDirectory> open_below(const OpenDirectory& base,
                                     std::string_view relative) override {
        if (relative.empty()) {
            UniqueFd fd(openat(base.fd(), ".", O_PATH | O_DIRECTORY | O_CLOEXEC));
            if (!fd) return io_error("open", base.path(), errno);
            return OpenDirectory(base.path(), std::move(fd));
        }
        if (!is_relative_below(relative)) return invalid_relative(relative);
        UniqueFd fd = open_beneath(base.fd(), std::string(relative), O_PATH | O_DIRECTORY);
        if (!fd) return walk_error("open", base.path_of(relative), errno);
        return OpenDirectory(base.path_of(relative), std::move(fd));
    }
};

}  // namespace

Result<std::optional<FileBytes>> Files::read_bytes(
    const OpenDirectory& base, std::string_view relative, std::uint64_t max_bytes,
    std::chrono::seconds stamp_after, const Writers* writers, std::uint64_t /*map_from*/) {
    auto text = read(base, relative, max_bytes, stamp_after, writers);
    if (!text) return text.error();
    if (!*text) return std::optional<FileBytes>();
    return std::optional<FileBytes>(FileBytes(std::move(**text)));
}

Files& real_files() {
    static RealFiles files;
    return files;
}

Result<std::optional<std::string>> read_named_file(const std::string& path,
                                                   std::uint64_t max_bytes) {
    const UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
    if (!fd) {
        if (errno == ENOENT) return std::optional<std::string>();
        return io_error("open", path, errno);
    }
    std::string out;
    char chunk[65536];
    for (;;) {
        const ssize_t n = ::read(fd.get(), chunk, sizeof chunk);
        if (n < 0) {
            if (errno == EINTR) continue;
            return io_error("read", path, errno);
        }
        if (n == 0) break;
        if (out.size() + static_cast<std::size_t>(n) > max_bytes) {
            return Error(Errc::kIoError, path + " is larger than " + std::to_string(max_bytes) +
                                             " bytes; not read");
        }
        out.append(chunk, static_cast<std::size_t>(n));
    }
    return std::optional<std::string>(std::move(out));
}

Error io_error(const std::string& what, const std::string& path, int error_number) {
    return Error(Errc::kIoError, what + " " + path + ": " + std::strerror(error_number));
}

}  // namespace kcache::util
