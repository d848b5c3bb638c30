// SPDX-License-Identifier: Apache-2.0
// A held directory's path for messages, and whether its path still names it.
#include "util/open_directory.hpp"

#include <sys/stat.h>

namespace kcache::util {

std::string OpenDirectory::path_of(std::string_view relative) const {
    std::string path = path_;
    if (!relative.empty()) {
        if (path.empty() || path.back() != '/') path += '/';
        path.append(relative);
    }
    return path;
}

bool OpenDirectory::still_at_its_path() const noexcept {
    if (!fd_) return false;
    struct stat held {};
    struct stat named {};
    if (fstat(fd_.get(), &held) != 0) return false;
    if (stat(path_.c_str(), &named) != 0) return false;
    return held.st_dev == named.st_dev && held.st_ino == named.st_ino;
}

}  // namespace kcache::util
