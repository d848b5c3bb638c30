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

// Whether every option acts before PTX (preprocessor, language, NVVM's code generation: -D, -I,
// -std, -use_fast_math, ...), so that NVRTC's PTX compiled by nvJitLink is the cubin NVRTC would
// make itself. False for anything else (-G, -lineinfo, -Xptxas, --maxrregcount, -fmad, an option
// this list does not know): those may reach the ptxas inside NVRTC. Takes normalized options.
bool acts_before_ptx_only(const std::vector<std::string>& normalized);

// The normalized options as one readable line, for the key material.
std::string options_line(const std::vector<std::string>& normalized);

}  // namespace kcache::compile
