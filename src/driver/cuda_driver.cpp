// SPDX-License-Identifier: Apache-2.0
// The real driver over libcuda: code loaded once serves every context of the process (CudaCode).
#include <memory>

#include "driver/cuda_api.hpp"
#include "driver/cuda_code.hpp"
#include "driver/driver.hpp"
#include "util/try.hpp"

namespace kcache::driver {
namespace {

CUfunction_attribute to_cuda(KernelAttribute attribute) {
    switch (attribute) {
        case KernelAttribute::kMaxDynamicSharedBytes:
            return CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
        case KernelAttribute::kPreferredSharedCarveout:
            return CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT;
        case KernelAttribute::kRequiredClusterWidth:
            return CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH;
        case KernelAttribute::kRequiredClusterHeight:
            return CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT;
        case KernelAttribute::kRequiredClusterDepth:
            return CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH;
        case KernelAttribute::kNonPortableClusterSizeAllowed:
            return CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED;
        case KernelAttribute::kClusterSchedulingPolicyPreference:
            return CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE;
    }
    return CU_FUNC_ATTRIBUTE_MAX;
}

CUfunc_cache to_cuda(CacheConfig config) {
    switch (config) {
        case CacheConfig::kPreferNone:
            return CU_FUNC_CACHE_PREFER_NONE;
        case CacheConfig::kPreferShared:
            return CU_FUNC_CACHE_PREFER_SHARED;
        case CacheConfig::kPreferL1:
            return CU_FUNC_CACHE_PREFER_L1;
        case CacheConfig::kPreferEqual:
            return CU_FUNC_CACHE_PREFER_EQUAL;
    }
    return CU_FUNC_CACHE_PREFER_NONE;
}

bool extended(const LaunchConfig& c) {
    return c.cluster.x != 0 || c.cluster.y != 0 || c.cluster.z != 0 || c.cooperative ||
           c.programmatic_dependent_launch;
}

class CudaDriver final : public Driver {
public:
    explicit CudaDriver(const CudaApi& api)
        : api_(api),
          uniform_arch_(find_uniform_arch(api).value_or(0)),
          device_count_(count_devices(api)) {}

    int uniform_arch() const noexcept override { return uniform_arch_; }

    std::string describe() const override {
        return "CUDA driver " + std::to_string(api_.driver_version / 1000) + "." +
               std::to_string(api_.driver_version % 1000 / 10);
    }

    Result<int> current_arch() override {
        // Cached per thread by context: a hit costs one cuCtxGetCurrent. Trap admitted: if a
        // context is destroyed and a new one on a device of another arch gets the same address,
        // this thread keeps the old arch until it switches context once.
        struct Cached {
            CUcontext context = nullptr;
            int arch = 0;
        };
        thread_local Cached cached;
        CUcontext context = nullptr;
        CUresult rc = api_.cuCtxGetCurrent(&context);
        if (rc != CUDA_SUCCESS) return api_.error(Errc::kDriverError, "cuCtxGetCurrent", rc);
        if (context == nullptr) {
            return Error(Errc::kNoContext,
                         "no current CUDA context on this thread: make one current (for "
                         "example with cudaSetDevice or cuCtxSetCurrent) before asking for a "
                         "kernel");
        }
        if (context == cached.context) return cached.arch;
        CUdevice device = 0;
        int major = 0;
        int minor = 0;
        if ((rc = api_.cuCtxGetDevice(&device)) != CUDA_SUCCESS ||
            (rc = api_.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                            device)) != CUDA_SUCCESS ||
            (rc = api_.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                            device)) != CUDA_SUCCESS) {
            return api_.error(Errc::kDriverError, "reading the current device's arch", rc);
        }
        cached = {context, major * 10 + minor};
        return cached.arch;
    }

    // Binaries load as a module into the current context, with a library made when another
    // context asks (see CudaCode); PTX loads as a library, through the driver's JIT.
    Result<ModuleId> load_module(const Source& source) override {
        TRY_ASSIGN(std::unique_ptr<CudaCode> code,
                   source.kind == SourceKind::kPtx
                       ? CudaCode::load_ptx(api_, source.bytes)
                       : CudaCode::load_binary(api_, Image{source.bytes, nullptr}, {}, true));
        // With lazy loading the driver may defer the JIT of PTX to the first kernel lookup in a
        // context; get_kernel() then reports it with the log, and the cache drops the code
        // (LoadedModules::discard).
        return ModuleId{code.release()};
    }

    // In place: the bytes `image.owner` keeps serve a library made later without a copy. In a
    // process of one device, where another context is rare, a binary with a way back to its bytes
    // keeps none of them.
    Result<ModuleId> load_binary(Image image, ImageSource again) override {
        TRY_ASSIGN(std::unique_ptr<CudaCode> code,
                   CudaCode::load_binary(api_, std::move(image), std::move(again),
                                         /*keep=*/device_count_ != 1));
        return ModuleId{code.release()};
    }

    void unload_module(ModuleId id) noexcept override { delete id.as<CudaCode>(); }

    Result<KernelId> get_kernel(ModuleId id, const std::string& name) override {
        TRY_ASSIGN(CudaKernel * kernel, id.as<CudaCode>()->kernel(name));
        return KernelId{kernel};
    }

    Result<std::vector<KernelParam>> kernel_params(KernelId id) override {
        auto* kernel = id.as<CudaKernel>();
        return kernel->code->params(*kernel);
    }

    Result<void> launch(KernelId id, const LaunchConfig& c, void** args) override {
        auto* kernel = id.as<CudaKernel>();
        TRY_ASSIGN(CUfunction function, kernel->code->launchable(*kernel));
        if (extended(c)) return launch_extended(function, c, args);
        CUresult rc = api_.cuLaunchKernel(function, c.grid.x, c.grid.y, c.grid.z, c.block.x,
                                          c.block.y, c.block.z, c.shared_bytes,
                                          static_cast<CUstream>(c.stream), args, nullptr);
        if (rc != CUDA_SUCCESS) return api_.error(Errc::kDriverError, "cuLaunchKernel", rc);
        return ok();
    }

    Result<void*> native_function(KernelId id) override {
        auto* kernel = id.as<CudaKernel>();
        TRY_ASSIGN(CUfunction function, kernel->code->function_here(*kernel));
        return static_cast<void*>(function);
    }

    Result<void*> native_kernel(KernelId id) override {
        auto* kernel = id.as<CudaKernel>();
        TRY_ASSIGN(CUkernel found, kernel->code->library_kernel(*kernel));
        return static_cast<void*>(found);
    }

    Result<DeviceGlobal> module_global(ModuleId id, const std::string& name) override {
        return id.as<CudaCode>()->global(name);
    }

    Result<void> set_kernel_attribute(KernelId id, KernelAttribute attribute, int value) override {
        auto* kernel = id.as<CudaKernel>();
        return kernel->code->change_settings(*kernel, {{{to_cuda(attribute), value}}, {}});
    }

    Result<void> set_cache_config(KernelId id, CacheConfig config) override {
        auto* kernel = id.as<CudaKernel>();
        return kernel->code->change_settings(*kernel, {{}, to_cuda(config)});
    }

private:
    Result<void> launch_extended(CUfunction function, const LaunchConfig& c, void** args) {
        CUlaunchAttribute attributes[3] = {};
        unsigned count = 0;
        if (c.cluster.x != 0 || c.cluster.y != 0 || c.cluster.z != 0) {
            CUlaunchAttribute& cluster = attributes[count++];
            cluster.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
            // An unset dimension of a cluster is one block wide.
            cluster.value.clusterDim.x = c.cluster.x != 0 ? c.cluster.x : 1;
            cluster.value.clusterDim.y = c.cluster.y != 0 ? c.cluster.y : 1;
            cluster.value.clusterDim.z = c.cluster.z != 0 ? c.cluster.z : 1;
        }
        if (c.cooperative) {
            attributes[count].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
            attributes[count++].value.cooperative = 1;
        }
        if (c.programmatic_dependent_launch) {
            attributes[count].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
            attributes[count++].value.programmaticStreamSerializationAllowed = 1;
        }
        CUlaunchConfig config = {};
        config.gridDimX = c.grid.x;
        config.gridDimY = c.grid.y;
        config.gridDimZ = c.grid.z;
        config.blockDimX = c.block.x;
        config.blockDimY = c.block.y;
        config.blockDimZ = c.block.z;
        config.sharedMemBytes = c.shared_bytes;
        config.hStream = static_cast<CUstream>(c.stream);
        config.attrs = attributes;
        config.numAttrs = count;
        CUresult rc = api_.cuLaunchKernelEx(&config, function, args, nullptr);
        if (rc != CUDA_SUCCESS) return api_.error(Errc::kDriverError, "cuLaunchKernelEx", rc);
        return ok();
    }

    // Visible devices are fixed once the driver is initialised (CUDA_VISIBLE_DEVICES is read at
    // cuInit), so this is decided once.
    static std::optional<int> find_uniform_arch(const CudaApi& api) {
        int count = 0;
        if (api.cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) return std::nullopt;
        std::optional<int> arch;
        for (int ordinal = 0; ordinal < count; ++ordinal) {
            CUdevice device = 0;
            int major = 0;
            int minor = 0;
            if (api.cuDeviceGet(&device, ordinal) != CUDA_SUCCESS ||
                api.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                         device) != CUDA_SUCCESS ||
                api.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                         device) != CUDA_SUCCESS) {
                return std::nullopt;
            }
            if (arch && *arch != major * 10 + minor) return std::nullopt;
            arch = major * 10 + minor;
        }
        return arch;
    }

    static int count_devices(const CudaApi& api) {
        int count = 0;
        return api.cuDeviceGetCount(&count) == CUDA_SUCCESS ? count : 0;
    }

    const CudaApi& api_;
    const int uniform_arch_;  // 0: devices differ
    const int device_count_;
};

// Stands in when libcuda cannot be used: every call says why, nothing crashes.
class MissingDriver final : public Driver {
public:
    explicit MissingDriver(Error why) : why_(std::move(why)) {}
    std::string describe() const override { return why_.message(); }
    Result<int> current_arch() override { return why_; }
    Result<ModuleId> load_module(const Source&) override { return why_; }
    Result<ModuleId> load_binary(Image, ImageSource) override { return why_; }
    void unload_module(ModuleId) noexcept override {}
    Result<KernelId> get_kernel(ModuleId, const std::string&) override { return why_; }
    Result<std::vector<KernelParam>> kernel_params(KernelId) override { return why_; }
    Result<void> launch(KernelId, const LaunchConfig&, void**) override { return why_; }
    Result<void*> native_function(KernelId) override { return why_; }
    Result<void*> native_kernel(KernelId) override { return why_; }
    Result<DeviceGlobal> module_global(ModuleId, const std::string&) override { return why_; }
    Result<void> set_kernel_attribute(KernelId, KernelAttribute, int) override { return why_; }
    Result<void> set_cache_config(KernelId, CacheConfig) override { return why_; }

private:
    Error why_;
};

}  // namespace

std::shared_ptr<Driver> default_driver() {
    static const std::shared_ptr<Driver> driver = []() -> std::shared_ptr<Driver> {
        const auto& api = cuda_api();
        if (!api.ok()) return std::make_shared<MissingDriver>(api.error());
        return std::make_shared<CudaDriver>(*api.value());
    }();
    return driver;
}

}  // namespace kcache::driver
