// SPDX-License-Identifier: Apache-2.0
// NVRTC (CUDA C++ -> PTX/cubin) and nvJitLink (PTX -> cubin) entry points, resolved at run time
// with dlopen like the driver, so kcache builds and runs where they are missing and says so.
// Only src/driver, its tests and the benchmarks include this header: src/compile goes through
// nvrtc.hpp, nvjitlink.hpp and compiler_libraries.hpp, which hold no CUDA type.
#pragma once

#include <nvJitLink.h>
#include <nvrtc.h>

#include <memory>
#include <string>

#include "driver/compiler_libraries.hpp"
#include "kcache/result.hpp"

namespace kcache::driver {

#define KCACHE_NVRTC_FUNCTIONS(X) \
    X(nvrtcVersion)               \
    X(nvrtcGetErrorString)        \
    X(nvrtcCreateProgram)         \
    X(nvrtcDestroyProgram)        \
    X(nvrtcCompileProgram)        \
    X(nvrtcGetPTXSize)            \
    X(nvrtcGetPTX)                \
    X(nvrtcGetCUBINSize)          \
    X(nvrtcGetCUBIN)              \
    X(nvrtcGetLTOIRSize)          \
    X(nvrtcGetLTOIR)              \
    X(nvrtcGetProgramLogSize)     \
    X(nvrtcGetProgramLog)         \
    X(nvrtcAddNameExpression)     \
    X(nvrtcGetLoweredName)

struct NvrtcApi {
#define KCACHE_NVRTC_DECLARE(name) decltype(&::name) name = nullptr;
    KCACHE_NVRTC_FUNCTIONS(KCACHE_NVRTC_DECLARE)
#undef KCACHE_NVRTC_DECLARE
    int major = 0;
    int minor = 0;
    std::string library_path;  // which file was loaded, for the toolchain fingerprint and logs
};

// nvJitLink's header wraps versioned symbols (__nvJitLinkCreate_13_0) in static inline
// functions, so the table holds the versioned ones.
struct NvJitLinkApi {
    decltype(&::__nvJitLinkCreate_13_0) create = nullptr;
    decltype(&::__nvJitLinkDestroy_13_0) destroy = nullptr;
    decltype(&::__nvJitLinkAddData_13_0) add_data = nullptr;
    decltype(&::__nvJitLinkComplete_13_0) complete = nullptr;
    decltype(&::__nvJitLinkGetLinkedCubinSize_13_0) cubin_size = nullptr;
    decltype(&::__nvJitLinkGetLinkedCubin_13_0) cubin = nullptr;
    decltype(&::__nvJitLinkGetErrorLogSize_13_0) error_log_size = nullptr;
    decltype(&::__nvJitLinkGetErrorLog_13_0) error_log = nullptr;
    decltype(&::__nvJitLinkGetInfoLogSize_13_0) info_log_size = nullptr;
    decltype(&::__nvJitLinkGetInfoLog_13_0) info_log = nullptr;
    decltype(&::nvJitLinkVersion) version = nullptr;
    unsigned int major = 0;
    unsigned int minor = 0;
    std::string library_path;
    // For a copy in a link map of its own (load_nvjitlink_copy): to be called on a thread
    // before the thread calls into the copy. Null for the process's own nvJitLink.
    void (*enter_thread)() = nullptr;
    // A copy's link map (an Lmid_t); 0 (LM_ID_BASE) for the process's own nvJitLink.
    long link_map = 0;
};

// Loaded once per process, from the identity's path; kUnsupported with the reason when the
// library cannot be used.
const Result<const NvrtcApi*>& nvrtc_api();
const Result<const NvJitLinkApi*>& nvjitlink_api();
// Another copy of the same nvJitLink file, in a link map of its own (dlmopen): its own globals
// and locks, and its own C library. nvJitLink serialises part of each link of one copy on a lock
// of its own (docs/performance.md); driver/nvjitlink_copies.hpp hands copies to concurrent links
// and says on which threads a copy may be called. kUnsupported when the loader refuses (each copy
// takes a share of the static TLS that a process has little of).
Result<std::unique_ptr<NvJitLinkApi>> load_nvjitlink_copy();
// Another copy of the same NVRTC file, in the link map of a copy of nvJitLink (`copy`, from
// load_nvjitlink_copy): NVRTC serialises the compiles of one copy (docs/performance.md), and
// a copy of it is called as the nvJitLink beside it is, on that copy's threads (its C library
// is theirs). kUnsupported when the loader refuses.
Result<std::unique_ptr<NvrtcApi>> load_nvrtc_copy(const NvJitLinkApi& copy);
// One small kernel compiled by `nvrtc`, on the thread that may call it: what NVRTC loads at its
// first compile (its builtins, the CUDA driver) is loaded afterwards. kUnsupported if it fails.
Result<void> compile_once(const NvrtcApi& nvrtc);

}  // namespace kcache::driver
