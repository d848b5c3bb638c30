// SPDX-License-Identifier: Apache-2.0
// The real file system's whole-file read (util::Files::read and read_bytes) once the file is open:
// what it checks before allocating anything, when it maps rather than reads, and the read itself.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

#include "kcache/result.hpp"
#include "util/file_bytes.hpp"
#include "util/files.hpp"
#include "util/unique_fd.hpp"

namespace kcache::util {

// Reads (or maps, see Files::read_bytes) the opened file `fd`, `relative` below `base` (for
// messages), whole and closes it, stamping it as Files::read does. Checks its type, owner and
// size before allocating anything.
Result<std::optional<FileBytes>> read_whole_file(UniqueFd fd, const OpenDirectory& base,
                                                 std::string_view relative, std::uint64_t max_bytes,
                                                 std::chrono::seconds stamp_after,
                                                 const Writers* writers, std::uint64_t map_from);

}  // namespace kcache::util
