// SPDX-License-Identifier: Apache-2.0
// The seam between the cache and CUDA: everything the cache needs from a GPU driver, with no
// CUDA type in sight. CudaDriver implements it over libcuda (loaded at run time); the tests'
// FakeDriver (tests/testing) implements it in memory.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kcache/launch.hpp"
#include "kcache/result.hpp"
#include "kcache/source.hpp"

namespace kcache::driver {

// A handle a driver gives out, typed by what it names so that a kernel cannot be passed where a
// module is asked for. What it points at is the giving driver's business (for the real driver,
// a CudaCode and one of its CudaKernels); the empty handle ({}) names nothing.
template <class Tag>
class DriverHandle {
public:
    constexpr DriverHandle() noexcept = default;
    constexpr explicit DriverHandle(void* pointer) noexcept : pointer_(pointer) {}

    // The driver's own object behind the handle; only the driver that gave it out knows `T`.
    template <class T>
    T* as() const noexcept {
        return static_cast<T*>(pointer_);
    }
    constexpr explicit operator bool() const noexcept { return pointer_ != nullptr; }
    friend constexpr bool operator==(DriverHandle, DriverHandle) noexcept = default;

private:
    void* pointer_ = nullptr;
};

struct ModuleTag;
struct KernelTag;
using ModuleId = DriverHandle<ModuleTag>;
using KernelId = DriverHandle<KernelTag>;

// A binary's bytes and what keeps them alive.
struct Image {
    std::string_view bytes;
    std::shared_ptr<const void> owner;
};
// Gives a binary's bytes again, checked to be the ones loaded first; kArtifactGone when they
// cannot be had any more.
using ImageSource = std::function<Result<Image>()>;

struct KernelParam {
    std::size_t offset = 0;
    std::size_t size = 0;
};

class Driver {
public:
    virtual ~Driver() = default;

    // "CUDA driver 13.0", "fake driver"; for logs and the demo.
    virtual std::string describe() const = 0;

    // Compute capability of the calling thread's current context as major*10+minor (90 for
    // sm_90). kNoContext when the thread has none. Called on every cache hit: must be cheap.
    virtual Result<int> current_arch() = 0;

    // The arch of every device of the process when they all share one, so that a cache hit can
    // skip current_arch(); 0 when devices differ (or the driver cannot tell). A plain int, not an
    // optional: it is asked on every hit, and an optional comes back through memory.
    virtual int uniform_arch() const noexcept { return 0; }

    // Loads code for every context of the process: its kernels launch in whichever context is
    // current. A JIT or load failure comes back as kCompileFailed with the JIT's log.
    virtual Result<ModuleId> load_module(const Source& source) = 0;
    // A binary (cubin or fatbin) for every context. The driver may use the bytes in place for as
    // long as it keeps `image.owner`. Given `again`, it may instead let them go once the code is
    // loaded in the current context, and ask `again` for them when another context needs them:
    // a disk hit then leaves no copy of its file in memory.
    virtual Result<ModuleId> load_binary(Image image, ImageSource again) = 0;
    virtual void unload_module(ModuleId module) noexcept = 0;

    // Resolves a kernel by name and makes sure it is loadable in the current context, so that a
    // deferred JIT failure surfaces here rather than at the first launch.
    virtual Result<KernelId> get_kernel(ModuleId module, const std::string& name) = 0;

    // The kernel's parameter layout; kUnsupported where the driver cannot tell.
    virtual Result<std::vector<KernelParam>> kernel_params(KernelId kernel) = 0;

    // Launches in the calling thread's current context, with the config's extended options
    // (clusters, cooperative, programmatic dependent launch) where it asks for any.
    virtual Result<void> launch(KernelId kernel, const LaunchConfig& config, void** args) = 0;

    // What a caller may reach beyond a launch; kUnsupported from a driver that has none of it.
    // The kernel's CUfunction for the current context.
    virtual Result<void*> native_function(KernelId kernel);
    // The kernel's CUkernel (the library's, valid in every context).
    virtual Result<void*> native_kernel(KernelId kernel);
    // A module's __device__ or __constant__ variable in the current context.
    virtual Result<DeviceGlobal> module_global(ModuleId module, const std::string& name);
    // Applies to the kernel in every context, those it launches in later included.
    virtual Result<void> set_kernel_attribute(KernelId kernel, KernelAttribute attribute,
                                              int value);
    virtual Result<void> set_cache_config(KernelId kernel, CacheConfig config);
};

// The process's CUDA driver if libcuda.so.1 loads and initialises; otherwise a driver whose every
// call fails with kNoDriver and says why. Loaded once, shared by every cache.
std::shared_ptr<Driver> default_driver();

}  // namespace kcache::driver
