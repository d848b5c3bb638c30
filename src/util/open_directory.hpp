// SPDX-License-Identifier: Apache-2.0
// A directory held open (O_PATH), the base every file operation below it starts from.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "util/unique_fd.hpp"

namespace kcache::util {

// Held so that a file below it is reached without walking the directory's own path again, and
// so that a directory renamed or replaced meanwhile cannot redirect what kcache reads or
// deletes. Move-only; closes what it holds. fd -1: holds nothing.
class OpenDirectory {
public:
    OpenDirectory() = default;
    OpenDirectory(std::string path, UniqueFd fd) noexcept
        : path_(std::move(path)), fd_(std::move(fd)) {}

    // The path it was opened by, for messages: "<path>/<relative>".
    const std::string& path() const noexcept { return path_; }
    int fd() const noexcept { return fd_.get(); }
    // Gives up the descriptor, which the caller then owns.
    UniqueFd release() noexcept { return std::move(fd_); }
    std::string path_of(std::string_view relative) const;
    // Whether its path still names the directory held, not one made in its place after it was
    // removed (one stat).
    bool still_at_its_path() const noexcept;

private:
    std::string path_;
    UniqueFd fd_;
};

}  // namespace kcache::util
