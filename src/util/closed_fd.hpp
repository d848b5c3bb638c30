// A file descriptor closed when its holder leaves scope, however it leaves.
#pragma once

#include <unistd.h>

namespace kcache::util {

struct ClosedOnExit {
    explicit ClosedOnExit(int fd_in) noexcept : fd(fd_in) {}
    ClosedOnExit(const ClosedOnExit&) = delete;
    ClosedOnExit& operator=(const ClosedOnExit&) = delete;
    ~ClosedOnExit() {
        if (fd >= 0) close(fd);
    }
    const int fd;
};

}  // namespace kcache::util
