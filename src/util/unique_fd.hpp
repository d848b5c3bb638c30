// SPDX-License-Identifier: Apache-2.0
// The one owner of a file descriptor: move-only, closes what it holds when it goes, however it
// goes, and leaves errno as it found it so that an error path may close and then report.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <utility>

namespace kcache::util {

class UniqueFd {
public:
    UniqueFd() = default;
    explicit UniqueFd(int fd) noexcept : fd_(fd) {}
    ~UniqueFd() { reset(); }
    UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
    UniqueFd& operator=(UniqueFd&& other) noexcept {
        if (this != &other) reset(other.release());
        return *this;
    }
    UniqueFd(const UniqueFd&) = delete;
    UniqueFd& operator=(const UniqueFd&) = delete;

    int get() const noexcept { return fd_; }
    explicit operator bool() const noexcept { return fd_ >= 0; }
    // Gives up the descriptor, which the caller then owns.
    int release() noexcept { return std::exchange(fd_, -1); }
    void reset(int fd = -1) noexcept {
        if (fd_ >= 0) {
            const int saved = errno;
            (void)::close(fd_);
            errno = saved;
        }
        fd_ = fd;
    }
    // Closes now, for a written file whose close is its last chance to report an error: 0, or
    // the errno of the failure.
    int close() noexcept {
        if (fd_ < 0) return 0;
        const int rc = ::close(std::exchange(fd_, -1));
        return rc == 0 ? 0 : errno;
    }

private:
    int fd_ = -1;
};

}  // namespace kcache::util
