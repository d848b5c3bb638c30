// SPDX-License-Identifier: Apache-2.0
// The symbols a cubin (an ELF64 image) defines for other code to see: what a bundle's link is
// checked against, so that no definition serves two members (build/bundle.hpp).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kcache::compile {

// The names of the global and weak symbols `elf` defines (not those it only refers to), in symbol
// table order; nullopt when it is no little-endian ELF64 image or its tables do not read.
std::optional<std::vector<std::string>> cubin_defined_symbols(std::string_view elf);

}  // namespace kcache::compile
