// SPDX-License-Identifier: Apache-2.0
// NVRTC options in one spelling for the fingerprint, so that "-D N=4", "-DN=4" and
// "--define-macro=N=4" share one artifact, and a refusal for options that would make something
// other than a loadable cubin for the cache's arch.
#pragma once

#include <string>
#include <vector>

#include "kcache/result.hpp"

namespace kcache::compile {

// Order is kept (a later -D wins in the compiler too). kInvalidArgument, naming the option, for
// one that names the arch (-arch, --gpu-architecture, -gencode, -code: the cache picks the arch)
// or makes relocatable, LTO or no output (-rdc true, -dc, -dlto, -fdevice-syntax-only), which
// cannot be loaded on its own.
Result<std::vector<std::string>> normalize_options(const std::vector<std::string>& options);

// Whether the lean recipe (src/compile/cuda_compile.cpp) makes the code NVRTC would make: every
// option is one the front end alone takes (-D, -U, -I, -include, -std, -default-device, ...).
// Not so for -G, -lineinfo, -Xptxas, --maxrregcount, -ewp (ptxas options NVRTC passes on), for
// NVVM's math options (-use_fast_math, -ftz, -prec-div, -prec-sqrt, -fmad: with LTO they act at
// the link, and one NVRTC 13.0 build compiled -prec-div=false differently from its link), or for
// an option this list does not know. Takes normalized options.
bool lean_recipe_allows(const std::vector<std::string>& normalized);

// The normalized options as one readable line, for the key material.
std::string options_line(const std::vector<std::string>& normalized);

}  // namespace kcache::compile
