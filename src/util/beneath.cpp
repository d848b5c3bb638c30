// SPDX-License-Identifier: Apache-2.0
// The walk below a held directory: openat2 where the kernel has it, one level at a time where not.
#include "util/beneath.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <utility>

#include "util/files.hpp"

namespace kcache::util {
namespace {

// openat2 with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS does the walk in one call (a lookup's
// only system call but the read); where the kernel lacks it, each level is opened in turn.
std::atomic<bool> g_no_openat2{false};

}  // namespace

UniqueFd open_beneath(int base, const std::string& relative, int flags) {
    if (!g_no_openat2.load(std::memory_order_relaxed)) {
        open_how how{};
        how.flags = static_cast<std::uint64_t>(flags) | O_NOFOLLOW | O_CLOEXEC;
        how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
        const long fd = syscall(SYS_openat2, base, relative.c_str(), &how, sizeof how);
        if (fd >= 0) return UniqueFd(static_cast<int>(fd));
        // ENOSYS: an older kernel; EPERM: a seccomp filter that does not know the call.
        if (errno != ENOSYS && errno != EPERM) return UniqueFd();
        g_no_openat2.store(true, std::memory_order_relaxed);
    }
    UniqueFd level;  // the level reached so far, when not `base` itself
    std::size_t start = 0;
    for (;;) {
        const std::size_t slash = relative.find('/', start);
        const bool last = slash == std::string::npos;
        const std::string part = relative.substr(start, last ? std::string::npos : slash - start);
        UniqueFd next(openat(
            level ? level.get() : base, part.c_str(),
            last ? flags | O_NOFOLLOW | O_CLOEXEC : O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (!next || last) return next;
        level = std::move(next);
        start = slash + 1;
    }
}

int Parent::open(const OpenDirectory& base, std::string_view relative) {
    if (!is_relative_below(relative)) return EINVAL;
    const std::size_t slash = relative.rfind('/');
    name_ = std::string(slash == std::string_view::npos ? relative : relative.substr(slash + 1));
    if (slash == std::string_view::npos) {
        borrowed_ = base.fd();
        return 0;
    }
    owned_ = open_beneath(base.fd(), std::string(relative.substr(0, slash)), O_PATH | O_DIRECTORY);
    return owned_ ? 0 : errno;
}

Error walk_error(const std::string& what, const std::string& path, int error_number) {
    // ELOOP and ENOTDIR on the way mean a link or a file where a folder should be, which a path
    // walked with links followed would have gone through.
    if (error_number == ELOOP || error_number == EXDEV) {
        return Error(Errc::kIoError, what + " " + path +
                                         ": a symbolic link on the way, which kcache does not "
                                         "follow below its directory");
    }
    return io_error(what, path, error_number);
}

Error parent_error(const OpenDirectory& base, std::string_view relative, int error_number) {
    if (error_number == EINVAL) return invalid_relative(relative);
    return walk_error("open", base.path_of(relative.substr(0, relative.rfind('/'))), error_number);
}

Error invalid_relative(std::string_view relative) {
    // Appended, not concatenated: GCC 12 at -O3 warns falsely (-Wrestrict) on "'" + string.
    std::string message = "'";
    message.append(relative).append("' is not a path below the cache directory");
    return Error(Errc::kInvalidArgument, std::move(message));
}

bool is_relative_below(std::string_view relative) noexcept {
    if (relative.empty() || relative.front() == '/' || relative.back() == '/') return false;
    std::size_t start = 0;
    for (;;) {
        const std::size_t slash = relative.find('/', start);
        const std::string_view part = relative.substr(
            start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
        if (part.empty() || part == "." || part == "..") return false;
        if (part.find('\0') != std::string_view::npos) return false;
        if (slash == std::string_view::npos) return true;
        start = slash + 1;
    }
}

}  // namespace kcache::util
