// SPDX-License-Identifier: Apache-2.0
// Compiling without a GPU: CUDA C++ to a cubin through NVRTC, and PTX to a cubin through
// nvJitLink, for an exact arch, through src/driver (nvrtc.hpp, nvjitlink.hpp), which loads both
// libraries at run time.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kcache/result.hpp"

namespace kcache::compile {

// An exact target: sm_90, or sm_90a for arch-specific features (wgmma, setmaxnreg).
struct Target {
    int arch = 90;  // major*10+minor
    bool arch_specific = false;

    std::string name() const;  // "sm_90" / "sm_90a"
};

struct CudaProgram {
    std::string name = "kernel.cu";  // shown in the compiler's messages
    std::string code;
    // Headers passed as strings: (include name, contents), for #include "name".
    std::vector<std::pair<std::string, std::string>> headers;
    // NVRTC options other than the target (-D..., -I..., -std=c++17, --use_fast_math, ...).
    std::vector<std::string> options;
    // Template instantiations to resolve, e.g. "softmax<float, 32>"; their lowered (mangled)
    // names come back in Compiled::lowered_names.
    std::vector<std::string> name_expressions;
    // Let NVRTC read headers from disk outside the toolkit (#include "/abs.h", -I, -include):
    // they are then not fingerprinted. Without it such a compile is refused (kInvalidArgument).
    bool allow_disk_headers = false;
};

struct Compiled {
    std::string cubin;
    std::string log;  // warnings, if any
    std::map<std::string, std::string> lowered_names;
    // The files NVRTC read from disk that no fingerprint covers (neither a header passed as a
    // string nor the toolkit's): empty unless CudaProgram::allow_disk_headers let it.
    std::vector<std::string> disk_headers;
};

// The exact compiler that compile_cuda() / link_ptx() would use, named without loading it (that
// costs more than a warm start): "NVRTC build-id 65be0d...". The toolchain part of a
// fingerprint. kUnsupported, saying what was looked for, when there is none.
// For CUDA C++ it also names what compile_cuda() passes to NVRTC besides the caller's options,
// so that a change there changes every fingerprint, and a compile worker from a kcache build that
// compiles differently reports another identity and is refused.
// Named once a process, as the libraries are found once: every request that plans a compile or a
// tier lookup asks, and building the text each time showed in a warm start's profile.
const Result<std::string>& cuda_compiler_identity();
const Result<std::string>& ptx_compiler_identity();

// The headers NVRTC's front end processed, in order, as its --fdevice-time-trace file names them:
// the path it opened, the name of a header passed as a string, or its built-in header's name.
// nullopt when `trace` is not such a trace: every compile processes the built-in header.
std::optional<std::vector<std::string>> headers_in_trace(std::string_view trace);

// The folder of the toolkit headers that ship with the NVRTC compile_cuda() uses (realpath),
// which its identity covers; empty when there is none.
const std::string& toolkit_include_folder();

// kChosen: the lean recipe when it applies (see cuda_compile.cpp), else NVRTC's own cubin.
// kNvrtcCubin: NVRTC's own cubin whatever the options, to compare the two.
enum class CudaRecipe { kChosen, kNvrtcCubin };

// kCompileFailed with the compiler's log on an error; kUnsupported if NVRTC is missing.
Result<Compiled> compile_cuda(const CudaProgram& program, const Target& target,
                              CudaRecipe recipe = CudaRecipe::kChosen);

// kCompileFailed with nvJitLink's log on an error; kUnsupported if nvJitLink is missing.
Result<Compiled> link_ptx(const std::string& ptx, const Target& target);
// Several PTX modules linked into one cubin, each an input of its own: one module to load for all
// their kernels. kCompileFailed with nvJitLink's log when two define one visible symbol alike.
Result<Compiled> link_ptx_bundle(const std::vector<const std::string*>& modules,
                                 const Target& target);

}  // namespace kcache::compile
