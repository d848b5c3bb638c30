// SPDX-License-Identifier: Apache-2.0
#include "driver/cuda_code.hpp"

#include <array>
#include <cstdint>

#include "util/log.hpp"
#include "util/try.hpp"

namespace kcache::driver {
namespace {

// The current context and its unique ID; a null context (ID 0) when the thread has none.
struct CurrentContext {
    CUcontext context = nullptr;
    unsigned long long id = 0;
};

Error no_context() {
    return Error(Errc::kNoContext,
                 "no current CUDA context on this thread: make one current before asking for or "
                 "launching a kernel");
}

// Why the current context cannot be identified: a destroyed one (a primary context released to
// no references stays current) is kNoContext, anything else the driver's error.
Error unidentified(const CudaApi& api, CUresult rc) {
    return api.error(rc == CUDA_ERROR_CONTEXT_IS_DESTROYED ? Errc::kNoContext : Errc::kDriverError,
                     "identifying the current context (cuCtxGetId)", rc);
}

Result<CurrentContext> current_context(const CudaApi& api) {
    CurrentContext current;
    CUresult rc = api.cuCtxGetCurrent(&current.context);
    if (rc != CUDA_SUCCESS) return api.error(Errc::kDriverError, "cuCtxGetCurrent", rc);
    // A driver before 12.0 has no IDs: its contexts are taken as they come (no homes then).
    if (current.context != nullptr && api.cuCtxGetId != nullptr &&
        (rc = api.cuCtxGetId(current.context, &current.id)) != CUDA_SUCCESS) {
        return unidentified(api, rc);
    }
    return current;
}

bool aligned16(const void* p) {
    return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

}  // namespace

Result<std::unique_ptr<CudaCode>> CudaCode::load_binary(const CudaApi& api, Image image,
                                                        ImageSource again, bool keep) {
    std::unique_ptr<CudaCode> code(new CudaCode(api));
    if (image.owner != nullptr) {
        code->owner_ = std::move(image.owner);
        code->image_ = image.bytes;
    } else {
        code->copy_.assign(image.bytes);
        code->image_ = code->copy_;
    }
    // Without a context that can be identified (none current, a driver before 12.0, or a
    // destroyed one) there is no home to load into: every context goes through the library.
    CurrentContext current;
    if (api.cuCtxGetId != nullptr) {
        if (auto found = current_context(api)) {
            current = *found;
        } else {  // not an error for the load: the library serves whatever context comes
            util::log_line(util::LogLevel::kInfo,
                           "loading without a home context: " + found.error().message());
        }
    }
    if (current.context == nullptr || current.id == 0) {
        TRY(code->library());
        return code;
    }
    CUresult rc = api.cuModuleLoadData(&code->module_, code->image_.data());
    if (rc != CUDA_SUCCESS) {
        return api.error(Errc::kCompileFailed, "loading a cubin with cuModuleLoadData", rc);
    }
    code->home_ = current.context;
    code->home_id_ = current.id;
    if (again && !keep) {
        // The module has its own copy. Keeping ours would cost a new process a first touch of
        // fresh memory for every kernel's bytes, where letting them go lets the next read reuse
        // the same memory.
        code->owner_.reset();
        code->copy_ = std::string();
        code->image_ = {};
        code->again_ = std::move(again);
    }
    return code;
}

Result<std::unique_ptr<CudaCode>> CudaCode::load_ptx(const CudaApi& api, const std::string& ptx) {
    std::unique_ptr<CudaCode> code(new CudaCode(api));
    code->ptx_ = true;
    code->copy_ = ptx;  // NUL-terminated, as the driver wants PTX
    code->image_ = code->copy_;
    TRY(code->library());
    // The driver keeps its own copy of PTX (the option to preserve it is for binaries only).
    code->copy_ = std::string();
    code->image_ = {};
    return code;
}

CudaCode::~CudaCode() {
    // Nothing useful to do with a failure here; the code is gone from our side either way.
    if (module_ != nullptr) {
        // A module dies with its context. Only a live home (the same ID at the same address) still
        // holds it: unloading through a stale handle could hit another context's module.
        unsigned long long id = 0;
        if (api_.cuCtxGetId(home_, &id) == CUDA_SUCCESS && id == home_id_) {
            (void)api_.cuModuleUnload(module_);
        }
    }
    if (CUlibrary library = library_.load(std::memory_order_acquire); library != nullptr) {
        (void)api_.cuLibraryUnload(library);
    }
}

Result<bool> CudaCode::at_home() const {
    // On every launch: one driver call, the ID of the current context (a null context names the
    // current one). A home implies a driver with context IDs.
    if (module_ != nullptr) {
        unsigned long long id = 0;
        if (api_.cuCtxGetId(nullptr, &id) == CUDA_SUCCESS) return id == home_id_;
    }
    // No home, or no current context that can be identified: the calls below say which.
    CUcontext current = nullptr;
    CUresult rc = api_.cuCtxGetCurrent(&current);
    if (rc != CUDA_SUCCESS) return api_.error(Errc::kDriverError, "cuCtxGetCurrent", rc);
    if (current == nullptr) return no_context();
    if (module_ == nullptr || current != home_) return false;
    // The address alone could be a new context's at a destroyed one's place.
    unsigned long long id = 0;
    if ((rc = api_.cuCtxGetId(current, &id)) != CUDA_SUCCESS) return unidentified(api_, rc);
    return id == home_id_;
}

Result<CUlibrary> CudaCode::library() {
    if (CUlibrary library = library_.load(std::memory_order_acquire); library != nullptr) {
        return library;
    }
    std::lock_guard lock(mutex_);  // recursive use: never called with mutex_ held
    if (CUlibrary library = library_.load(std::memory_order_acquire); library != nullptr) {
        return library;
    }
    if (gone_) return *gone_;
    if (image_.empty() && again_) {  // let go at the load: read back
        auto image = again_();
        if (!image) {
            gone_ = Error(Errc::kArtifactGone,
                          "loading the code into another context needs its bytes again: " +
                              image.error().message());
            return *gone_;
        }
        owner_ = std::move(image->owner);
        image_ = image->bytes;
    }
    CUlibrary library = nullptr;
    CUresult rc = CUDA_SUCCESS;
    if (ptx_) {
        error_log_.assign(16384, '\0');
        info_log_.assign(16384, '\0');
        std::array<CUjit_option, 4> options = {
            CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_INFO_LOG_BUFFER,
            CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES};
        // The driver takes sizes smuggled through void* slots.
        // NOLINTBEGIN(performance-no-int-to-ptr)
        std::array<void*, 4> values = {
            error_log_.data(),
            reinterpret_cast<void*>(static_cast<std::uintptr_t>(error_log_.size())),
            info_log_.data(),
            reinterpret_cast<void*>(static_cast<std::uintptr_t>(info_log_.size()))};
        // NOLINTEND(performance-no-int-to-ptr)
        rc = api_.cuLibraryLoadData(&library, image_.data(), options.data(), values.data(), 4,
                                    nullptr, nullptr, 0);
    } else {
        // The kept bytes outlive the library, so the driver may use them in place
        // (CU_LIBRARY_BINARY_IS_PRESERVED): no copy, and in a new process no first touches of
        // memory for one. The image must be suitably aligned; an entry's payload starts 16-byte
        // aligned, and so does a heap copy.
        const bool preserved = aligned16(image_.data());
        CUlibraryOption option = CU_LIBRARY_BINARY_IS_PRESERVED;
        // NOLINTNEXTLINE(performance-no-int-to-ptr)
        void* value = reinterpret_cast<void*>(std::uintptr_t{1});
        rc = api_.cuLibraryLoadData(&library, image_.data(), nullptr, nullptr, 0,
                                    preserved ? &option : nullptr, preserved ? &value : nullptr,
                                    preserved ? 1u : 0u);
    }
    if (rc != CUDA_SUCCESS) {
        return with_logs(api_.error(
            Errc::kCompileFailed,
            std::string("loading ") + (ptx_ ? "PTX" : "a cubin") + " with cuLibraryLoadData", rc));
    }
    library_.store(library, std::memory_order_release);
    return library;
}

Result<CudaKernel*> CudaCode::kernel(const std::string& name) {
    TRY_ASSIGN(const bool home, at_home());
    CUfunction function = nullptr;
    CUkernel from_library = nullptr;
    if (home) {
        CUresult rc = api_.cuModuleGetFunction(&function, module_, name.c_str());
        if (rc == CUDA_ERROR_NOT_FOUND) {
            return Error(Errc::kKernelNotFound, "no kernel named '" + name + "' in the module");
        }
        if (rc != CUDA_SUCCESS) {
            return api_.error(Errc::kCompileFailed, "cuModuleGetFunction(" + name + ")", rc);
        }
    } else {
        // A destroyed context must not cost a read-back and a library, nor pass for a failed JIT.
        TRY(current_context(api_));
        TRY_ASSIGN(CUlibrary library, this->library());
        CUresult rc = api_.cuLibraryGetKernel(&from_library, library, name.c_str());
        if (rc == CUDA_ERROR_NOT_FOUND) {
            return Error(Errc::kKernelNotFound, "no kernel named '" + name + "' in the module");
        }
        if (rc != CUDA_SUCCESS) {
            return with_logs(
                api_.error(Errc::kCompileFailed, "cuLibraryGetKernel(" + name + ")", rc));
        }
        // Loads the kernel into the current context now, so that a lazy JIT failure is
        // reported here with its log instead of at the first launch.
        CUfunction loaded = nullptr;
        rc = api_.cuKernelGetFunction(&loaded, from_library);
        if (rc != CUDA_SUCCESS) {
            return with_logs(api_.error(Errc::kCompileFailed,
                                        "loading kernel '" + name + "' into the current context",
                                        rc));
        }
    }
    std::lock_guard lock(mutex_);
    CudaKernel& kernel = kernels_.emplace_back();
    kernel.code = this;
    kernel.name = name;
    kernel.home_function.store(function, std::memory_order_release);
    kernel.kernel.store(from_library, std::memory_order_release);
    return &kernel;
}

Result<CUkernel> CudaCode::library_kernel(CudaKernel& kernel) {
    if (CUkernel found = kernel.kernel.load(std::memory_order_acquire); found != nullptr) {
        return found;
    }
    // First use away from home: the context at hand must be a live one (see kernel()).
    TRY(current_context(api_));
    TRY_ASSIGN(CUlibrary library, this->library());
    CUkernel found = nullptr;
    // Two threads may both ask; the driver hands both the same CUkernel.
    CUresult rc = api_.cuLibraryGetKernel(&found, library, kernel.name.c_str());
    if (rc != CUDA_SUCCESS) {
        return with_logs(
            api_.error(Errc::kDriverError, "cuLibraryGetKernel(" + kernel.name + ")", rc));
    }
    {
        // What the kernel was told goes with it before any launch can use it.
        std::lock_guard lock(mutex_);
        TRY(apply_settings(kernel.name, kernel.settings, nullptr, found));
    }
    kernel.kernel.store(found, std::memory_order_release);
    return found;
}

Result<CUfunction> CudaCode::home_function(CudaKernel& kernel) {
    if (CUfunction found = kernel.home_function.load(std::memory_order_acquire); found != nullptr) {
        return found;
    }
    // First asked for in another context: the module's own copy here, never a second one from the
    // library, whose __device__ variables would be apart from the module's. Two threads may both
    // ask; the driver hands both the same CUfunction.
    CUfunction found = nullptr;
    CUresult rc = api_.cuModuleGetFunction(&found, module_, kernel.name.c_str());
    if (rc != CUDA_SUCCESS) {
        return api_.error(Errc::kDriverError, "cuModuleGetFunction(" + kernel.name + ")", rc);
    }
    {
        std::lock_guard lock(mutex_);
        TRY(apply_settings(kernel.name, kernel.settings, found, nullptr));
    }
    kernel.home_function.store(found, std::memory_order_release);
    return found;
}

Result<CUfunction> CudaCode::launchable(CudaKernel& kernel) {
    // Two or three driver calls: small beside the launch itself.
    TRY_ASSIGN(const bool home, at_home());
    if (home) return home_function(kernel);
    TRY_ASSIGN(CUkernel found, library_kernel(kernel));
    // A CUkernel is accepted wherever a CUfunction is, and launches in the current context.
    return reinterpret_cast<CUfunction>(found);
}

Result<std::vector<KernelParam>> CudaCode::params(CudaKernel& kernel) {
    // Through the current context's handle: the home function may be gone with its context.
    TRY_ASSIGN(const bool by_function, at_home());
    if (by_function ? api_.cuFuncGetParamInfo == nullptr : api_.cuKernelGetParamInfo == nullptr) {
        return Error(Errc::kUnsupported, "asking a kernel's parameters needs a CUDA 12.4+ driver");
    }
    CUfunction function = nullptr;
    CUkernel from_library = nullptr;
    if (by_function) {
        TRY_ASSIGN(function, home_function(kernel));
    } else {
        TRY_ASSIGN(from_library, library_kernel(kernel));
    }
    std::vector<KernelParam> params;
    for (std::size_t index = 0;; ++index) {
        KernelParam param;
        CUresult rc =
            by_function
                ? api_.cuFuncGetParamInfo(function, index, &param.offset, &param.size)
                : api_.cuKernelGetParamInfo(from_library, index, &param.offset, &param.size);
        if (rc == CUDA_ERROR_INVALID_VALUE) break;  // past the last parameter
        if (rc != CUDA_SUCCESS) {
            return api_.error(Errc::kDriverError,
                              by_function ? "cuFuncGetParamInfo" : "cuKernelGetParamInfo", rc);
        }
        params.push_back(param);
    }
    return params;
}

Result<CUfunction> CudaCode::function_here(CudaKernel& kernel) {
    TRY_ASSIGN(const bool home, at_home());
    if (home) return home_function(kernel);
    TRY_ASSIGN(CUkernel found, library_kernel(kernel));
    CUfunction function = nullptr;
    CUresult rc = api_.cuKernelGetFunction(&function, found);
    if (rc != CUDA_SUCCESS) {
        return api_.error(Errc::kDriverError, "cuKernelGetFunction(" + kernel.name + ")", rc);
    }
    return function;
}

Result<DeviceGlobal> CudaCode::global(const std::string& name) {
    TRY_ASSIGN(const bool home, at_home());
    CUdeviceptr address = 0;
    std::size_t size = 0;
    CUresult rc = CUDA_SUCCESS;
    if (home) {
        rc = api_.cuModuleGetGlobal(&address, &size, module_, name.c_str());
    } else {
        TRY(current_context(api_));
        TRY_ASSIGN(CUlibrary library, this->library());
        rc = api_.cuLibraryGetGlobal(&address, &size, library, name.c_str());
    }
    if (rc == CUDA_ERROR_NOT_FOUND) {
        return Error(Errc::kInvalidArgument,
                     "no __device__ or __constant__ variable named '" + name + "' in the module");
    }
    if (rc != CUDA_SUCCESS) {
        return api_.error(Errc::kDriverError, "getting the module's global '" + name + "'", rc);
    }
    return DeviceGlobal{static_cast<std::uint64_t>(address), size};
}

Error CudaCode::with_logs(const Error& base) const {
    std::string logs(error_log_.c_str());
    std::string info(info_log_.c_str());
    if (!info.empty()) logs += (logs.empty() ? "" : "\n") + info;
    return Error(base.code(), base.message(), std::move(logs));
}

}  // namespace kcache::driver
