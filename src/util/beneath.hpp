// SPDX-License-Identifier: Apache-2.0
// The walk below a held directory: each level opened from the one above it, no symbolic link
// followed, the errors of what lies on the way named for what they are.
#pragma once

#include <string>
#include <string_view>

#include "kcache/result.hpp"
#include "util/open_directory.hpp"
#include "util/unique_fd.hpp"

namespace kcache::util {

// Opens `relative` below the descriptor `base` with `flags` (O_NOFOLLOW and O_CLOEXEC added):
// -1 with errno on failure, ELOOP or EXDEV for a link on the way.
UniqueFd open_beneath(int base, const std::string& relative, int flags);

// The folder holding a path's last part, and that part's name. The folder is the base itself
// (borrowed) for a name directly below it, or held here.
class Parent {
public:
    int fd() const noexcept { return owned_ ? owned_.get() : borrowed_; }
    const std::string& name() const noexcept { return name_; }

    // 0, or the errno of the failure (EINVAL: `relative` is not a path below `base`).
    int open(const OpenDirectory& base, std::string_view relative);

private:
    int borrowed_ = -1;
    UniqueFd owned_;
    std::string name_;
};

// For a failed Parent::open.
Error parent_error(const OpenDirectory& base, std::string_view relative, int error_number);
// For a failed walk: a link or a file where a folder should be is said to be one.
Error walk_error(const std::string& what, const std::string& path, int error_number);
Error invalid_relative(std::string_view relative);

}  // namespace kcache::util
