// SPDX-License-Identifier: Apache-2.0
// The exact compiler a compile would use, named without loading it: the toolchain part of a
// fingerprint (see compiler.hpp).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string_view>

#include "compile/compiler.hpp"
#include "driver/compiler_libraries.hpp"
#include "util/unique_fd.hpp"

namespace kcache::compile {
namespace {

// How compile_cuda() (cuda_compile.cpp) makes a cubin, as cuda_compiler_identity() names it: keep
// the two in step.
// The lean recipe is taken when nvJitLink is there and loads, and lean_recipe_allows() the
// options. The identity names nvJitLink's file, not whether it loads or links (that would cost a
// warm start the library's load), so where it cannot, NVRTC's own cubin is stored under the same
// fingerprint: the same instructions (tested), plus the unused variables.
// The time trace only lists the headers read (see compile_cuda), which the code does not depend
// on; it is named so that the recipe stays the whole truth.
constexpr const char* kCudaRecipe =
    "NVRTC -arch=<target> --fdevice-time-trace, or when the lean recipe applies: NVRTC "
    "-arch=compute_<target> -dlto --fdevice-time-trace, nvJitLink -arch=<target> -lto "
    "-optimize-unused-variables (--no-source-include for an NVRTC without the trace)";

Result<std::string> identity_of(const char* label,
                                const Result<driver::CompilerIdentity>& identity) {
    if (!identity) return identity.error();
    return std::string(label) + " " + identity->build;
}

// The first line of a small file that starts with `prefix`, without the prefix: the toolkit's
// header version, read without parsing a megabyte of cuda.h.
std::string line_after(const std::string& path, std::string_view prefix) {
    const util::UniqueFd file{open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)};
    if (!file) return {};
    struct stat status {};
    if (fstat(file.get(), &status) != 0 || !S_ISREG(status.st_mode) ||
        status.st_size > off_t{64} * 1024) {
        return {};
    }
    std::string text(static_cast<std::size_t>(status.st_size), '\0');
    if (read(file.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) return {};
    const std::size_t at = text.find(prefix);
    if (at == std::string::npos) return {};
    const std::size_t start = at + prefix.size();
    return text.substr(start, text.find('\n', start) - start);
}

}  // namespace

const Result<std::string>& cuda_compiler_identity() {
    static const Result<std::string> named = []() -> Result<std::string> {
        auto identity = identity_of("NVRTC", driver::nvrtc_identity());
        if (!identity) return identity;
        auto linker = identity_of("nvJitLink", driver::nvjitlink_identity());
        // The toolkit's headers are read from disk without a fingerprint of their own: their
        // folder and CCCL's version stand for them (NVRTC's build names the rest of the toolkit).
        const std::string& headers = toolkit_include_folder();
        const std::string cccl =
            headers.empty()
                ? std::string()
                : line_after(headers + "/cccl/cuda/std/__cccl/version.h", "#define CCCL_VERSION ");
        return *identity + "; " + (linker ? *linker : std::string("no nvJitLink")) +
               "; toolkit headers " + (headers.empty() ? std::string("none") : headers) +
               (cccl.empty() ? std::string() : " (CCCL " + cccl + ")") + "; " + kCudaRecipe;
    }();
    return named;
}

const Result<std::string>& ptx_compiler_identity() {
    static const Result<std::string> named = identity_of("nvJitLink", driver::nvjitlink_identity());
    return named;
}

}  // namespace kcache::compile
