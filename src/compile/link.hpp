// SPDX-License-Identifier: Apache-2.0
// Inputs through nvJitLink to a cubin: PTX for link_ptx() and link_ptx_bundle(), NVRTC's LTO IR
// for compile_cuda's lean recipe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "compile/compiler.hpp"
#include "driver/nvjitlink.hpp"
#include "kcache/result.hpp"

namespace kcache::compile {

// One input of a link: its bytes, and the name nvJitLink's messages give it.
struct LinkSource {
    std::string_view bytes;
    std::string name;
};

// `name` is shown in nvJitLink's messages; LTO IR is linked with -lto -optimize-unused-variables
// and `extra_options`. kCompileFailed with nvJitLink's log on an error; kUnsupported if
// nvJitLink is missing.
Result<Compiled> link(driver::LinkInput type, std::string_view bytes, const std::string& name,
                      const Target& target, const std::vector<std::string>& extra_options);

}  // namespace kcache::compile
