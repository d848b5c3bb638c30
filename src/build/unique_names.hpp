// SPDX-License-Identifier: Apache-2.0
// A PTX module linked alone gets module-scope names of its own: each name its code defines ends in
// a marker and a number taken from its source. The driver's cost to load a module, and to unload
// it, grows with the modules of its context that define a kernel of the same name (0.40 ms a load
// at 1,000 such modules, 3.1 ms at 10,000, against 0.07 and 0.19 renamed: docs/performance.md),
// and generators reuse kernel names for every shape. The caller still asks by the name it wrote;
// the loaded module asks the driver for the renamed one (LoadedModule::names_end_in).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "util/fingerprint.hpp"

namespace kcache::build {

// What every renamed name ends in: the marker, then a number. Not a bundle's marker ($kc): a
// bundle's code holds only its members' names (build/bundle.hpp).
inline constexpr std::string_view kUniqueNameMarker = "$ku";

// The number that the names of a module whose source hashes to `source_hash`
// (build::source_hash) end in: 48 bits of the hash.
std::size_t unique_names_number(const util::Fingerprint& source_hash);
// What they end in: the marker and the number, in decimal.
std::string unique_names_suffix(std::size_t number);

// `ptx` with each name it defines at module scope (compile::ptx_module_symbols) followed by the
// suffix of `number`, definitions and uses alike; nullopt where its module-scope statements do
// not read or a name already holds the marker: it is linked as it is, and the module finds its
// names unrenamed.
std::optional<std::string> with_unique_names(std::string_view ptx, std::size_t number);

}  // namespace kcache::build
