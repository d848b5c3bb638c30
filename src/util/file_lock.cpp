#include "util/file_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include "util/files.hpp"

namespace kcache::util {

namespace {

// A lock file below a cache directory: never through a link, never a FIFO (O_NONBLOCK keeps the
// open itself from waiting), only a regular file.
int open_lock_at(int directory_fd, const std::string& name) {
    const int fd = openat(directory_fd, name.c_str(),
                          O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0600);
    if (fd < 0) return -1;
    struct stat info {};
    if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
        close(fd);
        errno = EINVAL;
        return -1;
    }
    return fd;
}

}  // namespace

std::optional<FileLock> FileLock::acquire_at(int directory_fd, const std::string& name,
                                             std::chrono::milliseconds patience) {
    const int fd = open_lock_at(directory_fd, name);
    if (fd < 0) return std::nullopt;
    return wait_for(fd, patience);
}

Result<std::optional<FileLock>> FileLock::try_acquire_at(int directory_fd,
                                                         const std::string& name) {
    const int fd = open_lock_at(directory_fd, name);
    if (fd < 0) {
        if (errno == EINVAL) {
            return Error(Errc::kIoError, "lock file " + name + " is not a regular file");
        }
        return io_error("open", name, errno);
    }
    return try_once(fd, name);
}

std::optional<FileLock> FileLock::acquire(const std::string& path,
                                          std::chrono::milliseconds patience) {
    const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return std::nullopt;
    return wait_for(fd, patience);
}

std::optional<FileLock> FileLock::wait_for(int fd, std::chrono::milliseconds patience) {
    const auto deadline = std::chrono::steady_clock::now() + patience;
    // Polling rather than a blocking flock: a blocking wait cannot be bounded, and a stuck
    // holder must not stall every launch behind it.
    auto pause = std::chrono::microseconds(200);
    for (;;) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) return FileLock(fd);
        if (errno != EWOULDBLOCK && errno != EINTR) break;
        if (std::chrono::steady_clock::now() >= deadline) break;
        std::this_thread::sleep_for(pause);
        pause = std::min(pause * 2, std::chrono::microseconds(20000));
    }
    close(fd);
    return std::nullopt;
}

Result<std::optional<FileLock>> FileLock::try_acquire(const std::string& path) {
    const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return io_error("open", path, errno);
    return try_once(fd, path);
}

Result<std::optional<FileLock>> FileLock::try_once(int fd, const std::string& shown) {
    for (;;) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) return std::optional<FileLock>(FileLock(fd));
        if (errno != EINTR) break;
    }
    const int saved = errno;
    close(fd);
    if (saved == EWOULDBLOCK) return std::optional<FileLock>();
    return io_error("lock", shown, saved);
}

FileLock::FileLock(FileLock&& other) noexcept : fd_(other.fd_) {
    other.fd_ = -1;
}

FileLock& FileLock::operator=(FileLock&& other) noexcept {
    if (this != &other) {
        release();
        fd_ = other.fd_;
        other.fd_ = -1;
    }
    return *this;
}

FileLock::~FileLock() {
    release();
}

void FileLock::release() noexcept {
    if (fd_ >= 0) {
        flock(fd_, LOCK_UN);
        close(fd_);
        fd_ = -1;
    }
}

}  // namespace kcache::util
