#include "util/file_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include "util/files.hpp"

namespace kcache::util {

std::optional<FileLock> FileLock::acquire(const std::string& path,
                                          std::chrono::milliseconds patience) {
    const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return std::nullopt;
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
    for (;;) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) return std::optional<FileLock>(FileLock(fd));
        if (errno != EINTR) break;
    }
    const int saved = errno;
    close(fd);
    if (saved == EWOULDBLOCK) return std::optional<FileLock>();
    return io_error("lock", path, saved);
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
