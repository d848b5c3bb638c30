// NVRTC (CUDA C++ -> PTX/cubin) and nvJitLink (PTX -> cubin) entry points, resolved at run time
// with dlopen like the driver, so kcache builds and runs where they are missing and says so.
// Only src/driver and src/compile include this header.
#pragma once

#include <nvJitLink.h>
#include <nvrtc.h>

#include <string>

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
};

// Which compiler library a compile would use, and its exact build, found without loading it:
// loading NVRTC or nvJitLink costs 5-60 ms, far more than a whole warm start, and a warm start
// needs only the identity (for the fingerprint), never the compiler.
struct CompilerIdentity {
    std::string path;   // the file the *_api() loaders below then load, exactly
    std::string build;  // "build-id <hex>", or "size <bytes>" for a file without a build ID
};

// Found once per process: the environment override (KCACHE_NVRTC_LIBRARY,
// KCACHE_NVJITLINK_LIBRARY), else a copy already loaded in the process, else the first file in
// LD_LIBRARY_PATH, $CUDA_HOME, $CUDA_PATH, /usr/local/cuda and the system folders, else the
// loader's own choice. kUnsupported with every place tried when there is none.
const Result<CompilerIdentity>& nvrtc_identity();
const Result<CompilerIdentity>& nvjitlink_identity();

// Loaded once per process, from the identity's path; kUnsupported with the reason when the
// library cannot be used.
const Result<const NvrtcApi*>& nvrtc_api();
const Result<const NvJitLinkApi*>& nvjitlink_api();

}  // namespace kcache::driver
