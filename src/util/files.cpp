#include "util/files.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <utility>

#include "util/closed_fd.hpp"
#include "util/spare_buffer.hpp"

namespace kcache::util {
namespace {

std::string temporary_name(const std::string& path) {
    char host[64] = "host";
    (void)gethostname(host, sizeof host - 1);
    thread_local std::mt19937_64 random(std::random_device{}());
    return path + ".tmp." + host + "." + std::to_string(getpid()) + "." + std::to_string(random());
}

std::chrono::system_clock::time_point modified_time(const struct stat& info) {
    return std::chrono::system_clock::time_point(
        std::chrono::duration_cast<std::chrono::system_clock::duration>(
            std::chrono::seconds(info.st_mtim.tv_sec) +
            std::chrono::nanoseconds(info.st_mtim.tv_nsec)));
}

bool is_directory(const std::string& path) {
    struct stat info {};
    return stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

class RealFiles final : public Files {
public:
    Result<std::optional<std::string>> read(const std::string& path) override {
        return read_and_stamp(path, std::chrono::seconds(-1));
    }

    // A negative `stale_after` never stamps.
    Result<std::optional<std::string>> read_and_stamp(const std::string& path,
                                                      std::chrono::seconds stale_after) override {
        const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT) return std::optional<std::string>();
        if (fd < 0) return io_error("open", path, errno);
        return read_open_file(
            fd, [&] { return path; }, stale_after);
    }

    OpenDirectory open_directory(const std::string& path) override {
        // O_PATH: the directory is only ever a base for openat(), never read itself. Not through a
        // symbolic link, as DiskStore::open checks it with lstat.
        const int fd = open(path.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        return OpenDirectory(path, fd);
    }

    Result<std::optional<std::string>> read_and_stamp_below(
        const OpenDirectory& directory, const std::string& relative,
        std::chrono::seconds stale_after) override {
        if (directory.fd() < 0) {
            return Files::read_and_stamp_below(directory, relative, stale_after);
        }
        const auto whole = [&] { return directory.path() + "/" + relative; };
        const int fd = openat(directory.fd(), relative.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            const int saved = errno;  // before whole() allocates
            if (saved == ENOENT) return std::optional<std::string>();
            return io_error("open", whole(), saved);
        }
        return read_open_file(fd, whole, stale_after);
    }

    Result<void> write_atomic(const std::string& path, std::string_view bytes,
                              Durability durability) override {
        const std::string temp = temporary_name(path);
        const int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0) return io_error("create", temp, errno);
        auto fail = [&](const char* what) {
            const int saved = errno;
            close(fd);
            unlink(temp.c_str());
            return io_error(what, temp, saved);
        };
        std::size_t done = 0;
        while (done < bytes.size()) {
            const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
            if (n < 0) {
                if (errno == EINTR) continue;
                return fail("write");
            }
            done += static_cast<std::size_t>(n);
        }
        if (durability == Durability::kSynced && fsync(fd) != 0) return fail("fsync");
        if (close(fd) != 0) {
            const int saved = errno;
            unlink(temp.c_str());
            return io_error("close", temp, saved);
        }
        if (rename(temp.c_str(), path.c_str()) != 0) {
            const int saved = errno;
            unlink(temp.c_str());
            return io_error("rename", path, saved);
        }
        return ok();
    }

    Result<void> remove(const std::string& path) override {
        if (unlink(path.c_str()) != 0 && errno != ENOENT) return io_error("remove", path, errno);
        return ok();
    }

    Result<void> make_directories(const std::string& path, mode_t mode) override {
        // The whole path first: usually it is there, or only its last level is missing (an
        // entry's folder), and then one call does, where a call per level cost every store's
        // opening and every write a system call per component of the cache directory's path.
        if (mkdir(path.c_str(), mode) == 0) return ok();
        const int whole = errno;
        if (whole == EEXIST && is_directory(path)) return ok();
        if (whole != ENOENT && whole != EEXIST) return io_error("mkdir", path, whole);
        for (std::size_t pos = 1; pos <= path.size(); ++pos) {
            if (pos != path.size() && path[pos] != '/') continue;
            const std::string prefix = path.substr(0, pos);
            if (mkdir(prefix.c_str(), mode) != 0 && errno != EEXIST) {
                return io_error("mkdir", prefix, errno);
            }
        }
        return ok();
    }

    Result<std::vector<std::string>> list_directory(const std::string& path) override {
        DIR* dir = opendir(path.c_str());
        if (dir == nullptr) return io_error("list", path, errno);
        std::vector<std::string> names;
        for (;;) {
            // readdir signals an error only through errno, so it is cleared before each call.
            errno = 0;
            const dirent* item = readdir(dir);
            if (item == nullptr) break;
            const std::string_view name = item->d_name;
            if (name != "." && name != "..") names.emplace_back(name);
        }
        const int saved = errno;
        closedir(dir);
        if (saved != 0) return io_error("list", path, saved);
        return names;
    }

    Result<std::optional<FileStatus>> status(const std::string& path) override {
        struct stat info {};
        if (lstat(path.c_str(), &info) != 0) {
            if (errno == ENOENT) return std::optional<FileStatus>();
            return io_error("stat", path, errno);
        }
        FileStatus out;
        out.kind = S_ISREG(info.st_mode)   ? FileKind::kRegular
                   : S_ISDIR(info.st_mode) ? FileKind::kDirectory
                                           : FileKind::kOther;
        out.size = static_cast<std::uint64_t>(info.st_size);
        out.modified = modified_time(info);
        return std::optional<FileStatus>(out);
    }

    Result<void> touch(const std::string& path) override {
        const timespec times[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
        if (utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW) != 0) {
            return io_error("touch", path, errno);
        }
        return ok();
    }

private:
    // Reads an opened file whole and closes it, stamping it as read_and_stamp() does.
    // `path_of` names it in an error only, so that a hit builds no path.
    template <class PathOf>
    static Result<std::optional<std::string>> read_open_file(int fd, const PathOf& path_of,
                                                             std::chrono::seconds stale_after) {
        const ClosedOnExit closed{fd};  // an allocation that throws included
        struct stat info {};
        if (fstat(fd, &info) != 0) {
            const int saved = errno;
            return io_error("stat", path_of(), saved);
        }
        // One read of the size fstat gave, into a string allocated once: entries are replaced by
        // rename, never grown in place, so reading on to see EOF was a syscall per hit for
        // nothing. A short read (a file cut meanwhile) still loops until that size or EOF. What
        // reports no size (a pipe, /proc) is read to EOF instead.
        const bool sized = S_ISREG(info.st_mode) && info.st_size > 0;
        // Into this thread's spare buffer when it has one (see spare_buffer.hpp): a new process
        // reading entry after entry between driver loads then faults no fresh pages in.
        std::string out = take_spare_buffer();
        out.resize(sized ? static_cast<std::size_t>(info.st_size) : std::size_t{4096});
        std::size_t done = 0;
        for (;;) {
            if (done == out.size()) {
                if (sized) break;
                out.resize(out.size() * 2);
            }
            const ssize_t n = ::read(fd, out.data() + done, out.size() - done);
            if (n < 0) {
                if (errno == EINTR) continue;
                const int saved = errno;
                return io_error("read", path_of(), saved);
            }
            if (n == 0) break;
            done += static_cast<std::size_t>(n);
        }
        out.resize(done);
        if (stale_after.count() >= 0 &&
            std::chrono::system_clock::now() - modified_time(info) > stale_after) {
            const struct timespec times[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
            (void)futimens(fd, times);  // ignored on purpose: see Files::read_and_stamp
        }
        return std::optional<std::string>(std::move(out));
    }
};

}  // namespace

Result<std::optional<std::string>> Files::read_and_stamp(const std::string& path,
                                                         std::chrono::seconds /*stale_after*/) {
    auto bytes = read(path);
    if (bytes && *bytes) (void)touch(path);  // ignored on purpose: see the declaration
    return bytes;
}

Result<std::optional<std::string>> Files::read_and_stamp_below(const OpenDirectory& directory,
                                                               const std::string& relative,
                                                               std::chrono::seconds stale_after) {
    return read_and_stamp(directory.path() + "/" + relative, stale_after);
}

OpenDirectory Files::open_directory(const std::string& path) {
    return OpenDirectory(path, -1);
}

OpenDirectory::~OpenDirectory() {
    if (fd_ >= 0) close(fd_);
}

OpenDirectory::OpenDirectory(OpenDirectory&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)) {}

OpenDirectory& OpenDirectory::operator=(OpenDirectory&& other) noexcept {
    if (this != &other) {
        if (fd_ >= 0) close(fd_);
        path_ = std::move(other.path_);
        fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
}

bool OpenDirectory::holds(dev_t device, ino_t inode) const noexcept {
    if (fd_ < 0) return true;
    struct stat held {};
    return fstat(fd_, &held) == 0 && held.st_dev == device && held.st_ino == inode;
}

bool OpenDirectory::still_at_its_path() const noexcept {
    if (fd_ < 0) return true;
    struct stat held {};
    struct stat named {};
    if (fstat(fd_, &held) != 0) return false;
    if (stat(path_.c_str(), &named) != 0) return false;
    return held.st_dev == named.st_dev && held.st_ino == named.st_ino;
}

Files& real_files() {
    static RealFiles files;
    return files;
}

Error io_error(const std::string& what, const std::string& path, int error_number) {
    return Error(Errc::kIoError, what + " " + path + ": " + std::strerror(error_number));
}

}  // namespace kcache::util
