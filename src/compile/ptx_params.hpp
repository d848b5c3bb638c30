// The parameter sizes of a PTX module's kernels, read from their `.entry` declarations: what a
// checked launch compares its arguments with, known without asking the driver (one call per
// parameter, 3-5 us a kernel on the H200 host, measured), where a new process pays that query at
// each kernel's first launch.
#pragma once

#include <cstddef>
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

}  // namespace kcache::compile
