// SPDX-License-Identifier: Apache-2.0
// The parameter sizes of a PTX module's kernels, read from their `.entry` declarations: what a
// checked launch compares its arguments with, known without asking the driver (one call per
// parameter), where a new process would pay that query at each kernel's first launch.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kcache::compile {

// (kernel name, parameter sizes in bytes, in order), sorted by name, one per `.entry` whose
// parameter list this reads completely. A declaration it does not fully understand (an opaque
// .texref, a type it does not know, a malformed list) leaves its kernel out: the caller asks the
// driver for that one.
using PtxParamSizes = std::vector<std::pair<std::string, std::vector<std::size_t>>>;

PtxParamSizes ptx_param_sizes(std::string_view ptx);

// The sizes as one line of an entry's key material, read when its PTX was compiled, so that a hit
// need not read a large PTX module again:
// "name=8,8,4;other=" (`other` takes no parameters). Empty for no kernels.
std::string param_sizes_line(const PtxParamSizes& sizes);
// The inverse; nullopt for anything else (kernels out of order or twice, a size that is no
// plain positive decimal), when the caller reads the PTX itself.
std::optional<PtxParamSizes> parse_param_sizes_line(std::string_view line);

}  // namespace kcache::compile
