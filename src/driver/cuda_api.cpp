// SPDX-License-Identifier: Apache-2.0
#include "driver/cuda_api.hpp"

#include <dlfcn.h>

#include <cstring>

namespace kcache::driver {
namespace {

// The exported name of a function as cuda.h declares it: cuda.h maps cuMemAlloc to
// cuMemAlloc_v2 and so on, so expanding the macro first gives the symbol whose ABI matches the
// declaration we call through. (cuGetProcAddress with CUDA_VERSION would instead return the
// newest version, whose signature can differ: cuCtxSynchronize_v2 takes a context.)
#define KCACHE_SYMBOL_NAME(name) KCACHE_SYMBOL_TEXT(name)
#define KCACHE_SYMBOL_TEXT(name) #name

bool optional_function(const char* name) {
    return std::strcmp(name, "cuKernelGetParamInfo") == 0 ||
           std::strcmp(name, "cuFuncGetParamInfo") == 0 || std::strcmp(name, "cuCtxGetId") == 0;
}

Result<const CudaApi*> load() {
    void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
        const char* why = dlerror();
        return Error(Errc::kNoDriver,
                     std::string("no CUDA driver: ") + (why != nullptr ? why : "dlopen failed"));
    }
    auto* api = new CudaApi();  // lives for the process: kernels may launch during exit
    std::string missing;
#define KCACHE_CUDA_LOAD(name)                                                                 \
    if (void* fn = dlsym(handle, KCACHE_SYMBOL_NAME(name)); fn != nullptr) {                   \
        api->name = reinterpret_cast<decltype(api->name)>(fn);                                 \
    } else if (!optional_function(#name)) {                                                    \
        missing += missing.empty() ? KCACHE_SYMBOL_NAME(name) : ", " KCACHE_SYMBOL_NAME(name); \
    }
    KCACHE_CUDA_FUNCTIONS(KCACHE_CUDA_LOAD)
#undef KCACHE_CUDA_LOAD
    if (!missing.empty()) {
        delete api;
        return Error(Errc::kNoDriver, "no CUDA driver: libcuda.so.1 lacks " + missing);
    }
    CUresult rc = api->cuInit(0);
    if (rc != CUDA_SUCCESS) {
        Error error = api->error(Errc::kNoDriver, "no CUDA driver: cuInit failed", rc);
        delete api;
        return error;
    }
    api->cuDriverGetVersion(&api->driver_version);
    return static_cast<const CudaApi*>(api);
}

}  // namespace

std::string CudaApi::describe(CUresult result) const {
    const char* name = nullptr;
    const char* text = nullptr;
    if (cuGetErrorName != nullptr) cuGetErrorName(result, &name);
    if (cuGetErrorString != nullptr) cuGetErrorString(result, &text);
    std::string out = name != nullptr ? name : "CUDA error " + std::to_string(result);
    if (text != nullptr) out += std::string(" (") + text + ")";
    return out;
}

Error CudaApi::error(Errc code, const std::string& what, CUresult result) const {
    return Error(code, what + ": " + describe(result));
}

const Result<const CudaApi*>& cuda_api() {
    static const Result<const CudaApi*> api = load();
    return api;
}

}  // namespace kcache::driver
