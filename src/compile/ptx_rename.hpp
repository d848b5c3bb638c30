// SPDX-License-Identifier: Apache-2.0
// A PTX module's own module-scope names made unique to it, so that modules which reuse names
// (generators name kernels by their graph, not their shape) link into one cubin (build/bundle.hpp).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kcache::compile {

// `name` as rename_ptx_symbols writes it for member `index`: the name, `marker`, the index.
std::string renamed_symbol(std::string_view name, std::string_view marker, std::size_t index);

// `ptx` with every occurrence of each of `names` (sorted: what ptx_module_symbols gave for it) as
// a whole name, outside comments and strings, written as renamed_symbol(name, marker, index):
// its definitions and every use alike. nullopt when a name in the text already holds `marker`,
// where a renamed name could meet one that was there (another module's extern, say).
// With a marker whose first character is no digit and appears nowhere else in it ("$kc"), the
// renamed names of different indices never meet, whatever the names.
std::optional<std::string> rename_ptx_symbols(std::string_view ptx,
                                              const std::vector<std::string>& names,
                                              std::string_view marker, std::size_t index);

}  // namespace kcache::compile
