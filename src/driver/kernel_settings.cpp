// SPDX-License-Identifier: Apache-2.0
// What a caller sets on a kernel (attributes, the cache preference): applied to each of the
// kernel's handles, those made later included (cuda_code.hpp).
#include <algorithm>

#include "driver/cuda_code.hpp"
#include "util/try.hpp"

namespace kcache::driver {

Result<void> CudaCode::change_settings(CudaKernel& kernel, const KernelSettings& told) {
    std::lock_guard lock(mutex_);
    TRY(apply_settings(kernel.name, told, kernel.home_function.load(std::memory_order_acquire),
                       kernel.kernel.load(std::memory_order_acquire)));
    auto& kept = kernel.settings.attributes;
    for (const auto& setting : told.attributes) {
        const auto same = std::find_if(kept.begin(), kept.end(),
                                       [&](const auto& set) { return set.first == setting.first; });
        if (same != kept.end()) {
            same->second = setting.second;
        } else {
            kept.push_back(setting);
        }
    }
    if (told.cache_config) kernel.settings.cache_config = told.cache_config;
    return ok();
}

Result<void> CudaCode::apply_settings(const std::string& name, const KernelSettings& settings,
                                      CUfunction home, CUkernel library) {
    if (settings.attributes.empty() && !settings.cache_config) return ok();
    const auto failed = [&](const char* call, CUresult rc) {
        return api_.error(
            rc == CUDA_ERROR_INVALID_VALUE ? Errc::kInvalidArgument : Errc::kDriverError,
            std::string(call) + " for kernel '" + name + "'", rc);
    };
    if (home != nullptr) {
        for (const auto& [attribute, value] : settings.attributes) {
            if (CUresult rc = api_.cuFuncSetAttribute(home, attribute, value); rc != CUDA_SUCCESS) {
                return failed("cuFuncSetAttribute", rc);
            }
        }
        if (settings.cache_config) {
            if (CUresult rc = api_.cuFuncSetCacheConfig(home, *settings.cache_config);
                rc != CUDA_SUCCESS) {
                return failed("cuFuncSetCacheConfig", rc);
            }
        }
    }
    if (library != nullptr) {
        // A library's kernel is set per device: on every one, since any context may launch it.
        int devices = 0;
        if (CUresult rc = api_.cuDeviceGetCount(&devices); rc != CUDA_SUCCESS) {
            return failed("cuDeviceGetCount", rc);
        }
        for (int ordinal = 0; ordinal < devices; ++ordinal) {
            CUdevice device = 0;
            if (CUresult rc = api_.cuDeviceGet(&device, ordinal); rc != CUDA_SUCCESS) {
                return failed("cuDeviceGet", rc);
            }
            for (const auto& [attribute, value] : settings.attributes) {
                if (CUresult rc = api_.cuKernelSetAttribute(attribute, value, library, device);
                    rc != CUDA_SUCCESS) {
                    return failed("cuKernelSetAttribute", rc);
                }
            }
            if (settings.cache_config) {
                if (CUresult rc =
                        api_.cuKernelSetCacheConfig(library, *settings.cache_config, device);
                    rc != CUDA_SUCCESS) {
                    return failed("cuKernelSetCacheConfig", rc);
                }
            }
        }
    }
    return ok();
}

}  // namespace kcache::driver
