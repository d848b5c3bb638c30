// SPDX-License-Identifier: Apache-2.0
// Code loaded for every context of the process, at the price of one context for the context that
// loaded it.
//
// The library API (cuLibraryLoadData, CUkernel) serves every context; the module API
// (cuModuleLoadData, CUfunction) serves the context current at the load only, and costs less
// (docs/performance.md). Most processes use one context. So a binary is loaded as a module
// into the context current when it is loaded (its home), and the library is made only when another
// context asks for one of its kernels. Contexts are told apart by their unique IDs (cuCtxGetId),
// never by address alone: the address of a destroyed context can come back for a new one.
//
// PTX, and a load with no current context, go through the library alone.
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "driver/cuda_api.hpp"
#include "driver/driver.hpp"
#include "kcache/result.hpp"

namespace kcache::driver {

class CudaCode;

// What a caller set on a kernel (KernelAttribute, CacheConfig).
struct KernelSettings {
    std::vector<std::pair<CUfunction_attribute, int>> attributes;
    std::optional<CUfunc_cache> cache_config;
};

// One kernel of a CudaCode, as the cache holds it (a KernelId). Lives as long as its code.
struct CudaKernel {
    CudaCode* code = nullptr;
    std::string name;
    // The module's function, for the home context: set when the kernel is resolved there, else at
    // its first launch there. Every kernel of the code runs from one copy per context, so kernels
    // that share a __device__ variable see the same one.
    std::atomic<CUfunction> home_function{nullptr};
    // For every other context: the library's kernel, made on first need.
    std::atomic<CUkernel> kernel{nullptr};
    // Applied to each of its handles above as it is made; under the code's mutex_.
    KernelSettings settings;
};

class CudaCode {
public:
    // A cubin or fatbin: a module in the current context when there is one, else a library. For
    // a library made later the bytes are kept: through `image.owner` when it is set, else copied.
    // Unless `keep` is set, a module loaded with `again` keeps nothing and asks `again` then.
    static Result<std::unique_ptr<CudaCode>> load_binary(const CudaApi& api, Image image,
                                                         ImageSource again, bool keep);
    // PTX through the driver's JIT, as a library, with the JIT's logs kept for errors that
    // lazy loading reports later.
    static Result<std::unique_ptr<CudaCode>> load_ptx(const CudaApi& api, const std::string& ptx);

    CudaCode(const CudaCode&) = delete;
    CudaCode& operator=(const CudaCode&) = delete;
    ~CudaCode();  // unloads the module (if its context still lives) and the library

    // Resolves a kernel in the current context, loading it there now so that a deferred JIT
    // failure surfaces here rather than at a launch.
    Result<CudaKernel*> kernel(const std::string& name);
    // What cuLaunchKernel takes for `kernel` in the current context: the module's function in the
    // home context, the library's kernel elsewhere. kNoContext without a current context, and
    // kNoContext or kDriverError when the current one cannot be identified (destroyed). Lock-free
    // once the library exists.
    Result<CUfunction> launchable(CudaKernel& kernel);
    // The kernel's parameter layout, asked through the handle of the current context (the home
    // function at home, the library's kernel elsewhere); kUnsupported where the driver cannot tell
    // (before 12.4), kDriverError for a failed query.
    Result<std::vector<KernelParam>> params(CudaKernel& kernel);

    // The kernel's CUfunction for the current context (the module's at home, the library's
    // kernel's function elsewhere), and its CUkernel (making the library if need be).
    Result<CUfunction> function_here(CudaKernel& kernel);
    Result<CUkernel> library_kernel(CudaKernel& kernel);
    // A __device__ or __constant__ variable in the current context: the module's at home, the
    // library's elsewhere (as the kernels launched there see it).
    Result<DeviceGlobal> global(const std::string& name);
    // `told` set now on the kernel's handles that exist (the library's kernel on every device),
    // and kept for each one made later. An error leaves nothing recorded.
    Result<void> change_settings(CudaKernel& kernel, const KernelSettings& told);

private:
    explicit CudaCode(const CudaApi& api) : api_(api) {}

    // Whether the calling thread's current context is this code's home. kNoContext without a
    // current context; the driver's error when it cannot be identified.
    Result<bool> at_home() const;
    Result<CUlibrary> library();                           // made on first need, under mutex_
    Result<CUfunction> home_function(CudaKernel& kernel);  // resolved on first need
    // `settings` applied to a kernel's home function and its library kernel, either of which
    // may be null; under mutex_.
    Result<void> apply_settings(const std::string& name, const KernelSettings& settings,
                                CUfunction home, CUkernel library);
    Error with_logs(const Error& base) const;

    const CudaApi& api_;
    // Home: the context the module was loaded into, by address and unique ID.
    CUcontext home_ = nullptr;
    unsigned long long home_id_ = 0;
    CUmodule module_ = nullptr;

    std::mutex mutex_;  // serialises making the library and resolving kernels

    // The image, for the library: a view into `owner_`'s bytes or into `copy_`; empty once let go,
    // when `again_` gives it back. Written under mutex_ after the load.
    std::shared_ptr<const void> owner_;
    std::string copy_;
    std::string_view image_;
    ImageSource again_;
    // Why `again_` failed, once it has: every later ask fails the same way at once, without
    // reading the disk again on a launch path.
    std::optional<Error> gone_;
    bool ptx_ = false;

    std::atomic<CUlibrary> library_{nullptr};
    // Stable addresses, a node each (a deque's first block alone would outweigh most); under
    // mutex_.
    std::list<CudaKernel> kernels_;
    // The JIT's logs, for PTX: with lazy loading the driver may write them at the first use in a
    // context, so they live as long as the library.
    std::string error_log_;
    std::string info_log_;
};

}  // namespace kcache::driver
