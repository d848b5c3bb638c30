// SPDX-License-Identifier: Apache-2.0
// What a kernel is built from: the bytes a caller's generator returns on a miss.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kcache {

enum class SourceKind : std::uint8_t {
    kPtx,     // NUL-free PTX text: compiled on the host by nvJitLink, else the driver's JIT
    kCubin,   // an ELF cubin for one exact arch
    kFatbin,  // a fatbinary (several archs and/or PTX)
    kCuda,    // CUDA C++, compiled on the host by NVRTC (needed: the driver cannot compile it)
};

const char* source_kind_name(SourceKind kind) noexcept;

struct Source {
    SourceKind kind = SourceKind::kPtx;
    std::string bytes;  // the PTX text, the binary image, or the CUDA C++ code

    // CUDA C++ only; every field below is part of the fingerprint.
    // Headers passed as strings, (include name, contents), for #include "name". A header read
    // from disk outside the toolkit's include folder (#include "/abs.h", -I, -include) is
    // refused (kInvalidArgument), unless allow_disk_headers says otherwise.
    std::vector<std::pair<std::string, std::string>> headers;
    // NVRTC options other than the arch (-DN=4, -std=c++17, --use_fast_math, ...). The arch is
    // the cache's to choose; an option naming it is refused.
    std::vector<std::string> options;
    // Template instantiations to compile, e.g. "softmax<float, 32>"; kernel(key, make,
    // "softmax<float, 32>") then finds the kernel by that text. extern "C" kernels need none.
    std::vector<std::string> name_expressions;
    // Compile for sm_XXa (wgmma, setmaxnreg); PTX says so itself (.target sm_90a).
    bool arch_specific = false;
    // Let NVRTC read headers from disk: they are then not fingerprinted (after a change, put
    // their version in the key). An entry compiled so is never served to a Source without it.
    bool allow_disk_headers = false;

    static Source of(SourceKind kind, std::string bytes) {
        Source source;
        source.kind = kind;
        source.bytes = std::move(bytes);
        return source;
    }
    static Source ptx(std::string text) { return of(SourceKind::kPtx, std::move(text)); }
    static Source cubin(std::string data) { return of(SourceKind::kCubin, std::move(data)); }
    static Source fatbin(std::string data) { return of(SourceKind::kFatbin, std::move(data)); }
    static Source cuda(std::string code, std::vector<std::string> options = {},
                       std::vector<std::string> name_expressions = {}) {
        Source source = of(SourceKind::kCuda, std::move(code));
        source.options = std::move(options);
        source.name_expressions = std::move(name_expressions);
        return source;
    }
};

}  // namespace kcache
