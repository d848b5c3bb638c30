// SPDX-License-Identifier: Apache-2.0
// The CUDA driver entry points kcache uses, resolved at run time from libcuda.so.1 with dlsym, so
// that kcache builds and runs on machines without a driver. Only src/driver and GPU-only
// tests/benchmarks include this header.
#pragma once

#include <cuda.h>

#include <string>

#include "kcache/result.hpp"

namespace kcache::driver {

// Each entry is looked up under the exact symbol cuda.h declares (cuMemAlloc -> cuMemAlloc_v2),
// so the pointer's ABI is the declaration's.
#define KCACHE_CUDA_FUNCTIONS(X) \
    X(cuInit)                    \
    X(cuDriverGetVersion)        \
    X(cuGetErrorName)            \
    X(cuGetErrorString)          \
    X(cuDeviceGetCount)          \
    X(cuDeviceGet)               \
    X(cuDeviceGetAttribute)      \
    X(cuDeviceGetName)           \
    X(cuDevicePrimaryCtxRetain)  \
    X(cuDevicePrimaryCtxRelease) \
    X(cuCtxCreate)               \
    X(cuCtxDestroy)              \
    X(cuCtxSetCurrent)           \
    X(cuCtxGetCurrent)           \
    X(cuCtxGetDevice)            \
    X(cuCtxGetId)                \
    X(cuCtxSynchronize)          \
    X(cuLibraryLoadData)         \
    X(cuLibraryUnload)           \
    X(cuLibraryGetKernel)        \
    X(cuKernelGetFunction)       \
    X(cuKernelGetParamInfo)      \
    X(cuModuleLoadData)          \
    X(cuModuleUnload)            \
    X(cuModuleGetFunction)       \
    X(cuFuncGetParamInfo)        \
    X(cuLaunchKernel)            \
    X(cuLaunchKernelEx)          \
    X(cuFuncSetAttribute)        \
    X(cuFuncGetAttribute)        \
    X(cuFuncSetCacheConfig)      \
    X(cuKernelSetAttribute)      \
    X(cuKernelSetCacheConfig)    \
    X(cuModuleGetGlobal)         \
    X(cuLibraryGetGlobal)        \
    X(cuMemAlloc)                \
    X(cuMemFree)                 \
    X(cuMemGetInfo)              \
    X(cuMemcpyHtoD)              \
    X(cuMemcpyDtoH)              \
    X(cuStreamCreate)            \
    X(cuStreamDestroy)           \
    X(cuStreamSynchronize)       \
    X(cuEventCreate)             \
    X(cuEventRecord)             \
    X(cuEventSynchronize)        \
    X(cuEventElapsedTime)        \
    X(cuEventDestroy)

struct CudaApi {
#define KCACHE_CUDA_DECLARE(name) decltype(&::name) name = nullptr;
    KCACHE_CUDA_FUNCTIONS(KCACHE_CUDA_DECLARE)
#undef KCACHE_CUDA_DECLARE

    int driver_version = 0;  // e.g. 13000

    // "CUDA_ERROR_INVALID_PTX (a PTX JIT compilation failed)".
    std::string describe(CUresult result) const;
    // An Error for a failed call: "<what>: CUDA_ERROR_... (...)".
    Error error(Errc code, const std::string& what, CUresult result) const;
};

// Loads libcuda.so.1 and calls cuInit(0) once per process. kNoDriver says why it could not.
// Functions the installed driver lacks stay null (cuCtxGetId before 12.0, cuKernelGetParamInfo and
// cuFuncGetParamInfo before 12.4); the rest are required.
const Result<const CudaApi*>& cuda_api();

}  // namespace kcache::driver
