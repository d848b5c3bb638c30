// SPDX-License-Identifier: Apache-2.0
// For tests of compile workers: fake workers replay frames from files, and count their starts in
// a file a line each.
#pragma once

#include <unistd.h>

#include <fstream>
#include <string>

#include "compile/worker_protocol.hpp"

namespace kcache::test {

// Writes `payload` to `path` as one frame, exactly as write_frame sends it (captured through a
// pipe), for a fake worker to `cat`. False if any step failed.
inline bool write_frame_file(const std::string& path, const std::string& payload) {
    int fds[2];
    if (::pipe(fds) != 0) return false;
    const bool written = compile::write_frame(fds[1], payload).ok();
    ::close(fds[1]);
    std::string frame(compile::kFrameHeaderSize + payload.size(), '\0');
    const bool read =
        written && ::read(fds[0], frame.data(), frame.size()) == static_cast<ssize_t>(frame.size());
    ::close(fds[0]);
    if (!read) return false;
    std::ofstream out(path, std::ios::binary);
    out << frame;
    return static_cast<bool>(out);
}

// The lines of a file (0 when it does not exist).
inline int count_lines(const std::string& path) {
    std::ifstream in(path);
    int lines = 0;
    for (std::string line; std::getline(in, line);) ++lines;
    return lines;
}

}  // namespace kcache::test
