// NVRTC options in one spelling for the fingerprint, so that "-D N=4", "-DN=4" and
// "--define-macro=N=4" share one artifact, and a refusal for options that would make something
// other than a loadable cubin for the cache's arch.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kcache/result.hpp"

namespace kcache::compile {

// Order is kept (a later -D wins in the compiler too). kInvalidArgument, naming the option, for
// one that names the arch (-arch, --gpu-architecture, -gencode, -code: the cache picks the arch)
// or makes relocatable, LTO or no output (-rdc true, -dc, -dlto, -fdevice-syntax-only), which
// cannot be loaded on its own.
Result<std::vector<std::string>> normalize_options(const std::vector<std::string>& options);

// The options nvJitLink needs to compile NVRTC's LTO IR as NVRTC would have compiled the program
// itself (the lean recipe, src/compile/compiler.cpp): NVVM's math options (-ftz, -prec-div,
// -prec-sqrt, -fmad, -use_fast_math), which with LTO act at the link, in nvJitLink's spelling.
// nullopt if an option is neither that nor one the front end alone takes (-D, -I, -std,
// -default-device, ...): -G, -lineinfo, -Xptxas, --maxrregcount, -ewp, an option this list does
// not know. Takes normalized options.
std::optional<std::vector<std::string>> lean_link_options(
    const std::vector<std::string>& normalized);

// The normalized options as one readable line, for the key material.
std::string options_line(const std::vector<std::string>& normalized);

}  // namespace kcache::compile
