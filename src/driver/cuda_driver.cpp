// The real driver: context-independent loading (cuLibraryLoadData / CUkernel), so that one loaded
// library serves every context of the process.
#include <array>
#include <memory>

#include "driver/cuda_api.hpp"
#include "driver/driver.hpp"

namespace kcache::driver {
namespace {

// A loaded library and the JIT log buffers handed to the driver with it. With lazy loading the
// driver may JIT the PTX later (at the first use in a context) and write the logs then, so the
// buffers live exactly as long as the library.
struct CudaLibrary {
    CUlibrary library = nullptr;
    std::shared_ptr<const void> image_owner;  // keeps an in-place image alive while loaded
    std::string error_log;                    // sized only for PTX: binaries are not JIT-compiled
    std::string info_log;

    std::string logs() const {
        std::string out(error_log.c_str());
        std::string info(info_log.c_str());
        if (!info.empty()) out += (out.empty() ? "" : "\n") + info;
        return out;
    }
};

class CudaDriver final : public Driver {
public:
    explicit CudaDriver(const CudaApi& api) : api_(api), uniform_arch_(find_uniform_arch(api)) {}

    std::optional<int> uniform_arch() const noexcept override { return uniform_arch_; }

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

    Result<LibraryId> load_library(const Source& source) override {
        auto wrapper = std::make_unique<CudaLibrary>();
        std::array<CUjit_option, 4> options = {
            CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_INFO_LOG_BUFFER,
            CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES};
        const bool jit = source.kind == SourceKind::kPtx;
        if (jit) {
            wrapper->error_log.assign(16384, '\0');
            wrapper->info_log.assign(16384, '\0');
        }
        // The driver takes sizes smuggled through void* slots.
        // NOLINTBEGIN(performance-no-int-to-ptr)
        std::array<void*, 4> values = {
            wrapper->error_log.data(),
            reinterpret_cast<void*>(static_cast<std::uintptr_t>(wrapper->error_log.size())),
            wrapper->info_log.data(),
            reinterpret_cast<void*>(static_cast<std::uintptr_t>(wrapper->info_log.size()))};
        // NOLINTEND(performance-no-int-to-ptr)
        // PTX must reach the driver NUL-terminated; std::string guarantees that.
        CUresult rc = api_.cuLibraryLoadData(
            &wrapper->library, source.bytes.c_str(), jit ? options.data() : nullptr,
            jit ? values.data() : nullptr, jit ? 4u : 0u, nullptr, nullptr, 0);
        if (rc != CUDA_SUCCESS) {
            Error base = api_.error(
                Errc::kCompileFailed,
                std::string("loading ") + source_kind_name(source.kind) + " with cuLibraryLoadData",
                rc);
            return Error(Errc::kCompileFailed, base.message(), wrapper->logs());
        }
        // With lazy loading (the default) the driver may defer the JIT of PTX to the first
        // kernel lookup in a context; get_kernel() then reports it with this library's log, and
        // the cache drops the module (CacheCore::discard).
        return static_cast<LibraryId>(wrapper.release());
    }

    // In place: CU_LIBRARY_BINARY_IS_PRESERVED spares the driver its own copy of the image (and,
    // in a new process, the first touches of the memory for it: 5-8% of a load on the H200).
    // The image must be suitably aligned; an entry's payload starts 16-byte aligned.
    Result<LibraryId> load_cubin_in_place(std::string_view image,
                                          std::shared_ptr<const void> owner) override {
        if (reinterpret_cast<std::uintptr_t>(image.data()) % 16 != 0) {
            return load_library(Source::cubin(std::string(image)));
        }
        auto wrapper = std::make_unique<CudaLibrary>();
        wrapper->image_owner = std::move(owner);
        CUlibraryOption option = CU_LIBRARY_BINARY_IS_PRESERVED;
        // The driver takes option values through void* slots.
        // NOLINTNEXTLINE(performance-no-int-to-ptr)
        void* preserved = reinterpret_cast<void*>(std::uintptr_t{1});
        CUresult rc = api_.cuLibraryLoadData(&wrapper->library, image.data(), nullptr, nullptr, 0,
                                             &option, &preserved, 1);
        if (rc != CUDA_SUCCESS) {
            return api_.error(Errc::kCompileFailed, "loading a cubin with cuLibraryLoadData", rc);
        }
        return static_cast<LibraryId>(wrapper.release());
    }

    void unload_library(LibraryId id) noexcept override {
        std::unique_ptr<CudaLibrary> wrapper(static_cast<CudaLibrary*>(id));
        // Nothing useful to do with a failure here; the library is gone from our side either way.
        (void)api_.cuLibraryUnload(wrapper->library);
    }

    Result<KernelId> get_kernel(LibraryId id, const std::string& name) override {
        auto* wrapper = static_cast<CudaLibrary*>(id);
        CUkernel kernel = nullptr;
        CUresult rc = api_.cuLibraryGetKernel(&kernel, wrapper->library, name.c_str());
        if (rc == CUDA_ERROR_NOT_FOUND) {
            return Error(Errc::kKernelNotFound, "no kernel named '" + name + "' in the module");
        }
        if (rc != CUDA_SUCCESS) {
            Error base = api_.error(Errc::kCompileFailed, "cuLibraryGetKernel(" + name + ")", rc);
            return Error(base.code(), base.message(), wrapper->logs());
        }
        // Loads the kernel into the current context now, so that a lazy JIT failure is reported
        // here with its log instead of at the first launch.
        CUfunction function = nullptr;
        rc = api_.cuKernelGetFunction(&function, kernel);
        if (rc != CUDA_SUCCESS) {
            Error base = api_.error(Errc::kCompileFailed,
                                    "loading kernel '" + name + "' into the current context", rc);
            return Error(base.code(), base.message(), wrapper->logs());
        }
        return static_cast<KernelId>(kernel);
    }

    Result<std::vector<KernelParam>> kernel_params(KernelId id) override {
        if (api_.cuKernelGetParamInfo == nullptr) {
            return Error(Errc::kUnsupported, "cuKernelGetParamInfo needs a CUDA 12.4+ driver");
        }
        std::vector<KernelParam> params;
        for (std::size_t index = 0;; ++index) {
            KernelParam param;
            CUresult rc = api_.cuKernelGetParamInfo(static_cast<CUkernel>(id), index, &param.offset,
                                                    &param.size);
            if (rc == CUDA_ERROR_INVALID_VALUE) break;  // past the last parameter
            if (rc != CUDA_SUCCESS) {
                return api_.error(Errc::kUnsupported, "cuKernelGetParamInfo", rc);
            }
            params.push_back(param);
        }
        return params;
    }

    Result<void> launch(KernelId id, const LaunchConfig& c, void** args) override {
        // A CUkernel is accepted wherever a CUfunction is, and launches in the current context.
        CUresult rc = api_.cuLaunchKernel(reinterpret_cast<CUfunction>(id), c.grid.x, c.grid.y,
                                          c.grid.z, c.block.x, c.block.y, c.block.z, c.shared_bytes,
                                          static_cast<CUstream>(c.stream), args, nullptr);
        if (rc != CUDA_SUCCESS) return api_.error(Errc::kDriverError, "cuLaunchKernel", rc);
        return ok();
    }

private:
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

    const CudaApi& api_;
    const std::optional<int> uniform_arch_;
};

// Stands in when libcuda cannot be used: every call says why, nothing crashes.
class MissingDriver final : public Driver {
public:
    explicit MissingDriver(Error why) : why_(std::move(why)) {}
    std::string describe() const override { return why_.message(); }
    Result<int> current_arch() override { return why_; }
    Result<LibraryId> load_library(const Source&) override { return why_; }
    void unload_library(LibraryId) noexcept override {}
    Result<KernelId> get_kernel(LibraryId, const std::string&) override { return why_; }
    Result<std::vector<KernelParam>> kernel_params(KernelId) override { return why_; }
    Result<void> launch(KernelId, const LaunchConfig&, void**) override { return why_; }

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
