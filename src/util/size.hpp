// SPDX-License-Identifier: Apache-2.0
// Sizes as people write them, with ccache's units: k, M, G, T (powers of 1000) and Ki, Mi, Gi, Ti
// (powers of 1024); a bare number means G, as in ccache. "0" means no limit wherever a budget
// takes one.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kcache/result.hpp"

namespace kcache::util {

// kInvalidArgument, quoting the text, for anything else (negative, unknown unit, overflow).
Result<std::uint64_t> parse_size(std::string_view text);

// "4.0 GiB", "512.0 KiB", "17 bytes": for people, not for parsing back.
std::string format_size(std::uint64_t bytes);

}  // namespace kcache::util
