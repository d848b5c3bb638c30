// SPDX-License-Identifier: Apache-2.0
// The C API's extended launch, kernel attributes, native handles and module globals.
#include <cstddef>
#include <span>

#include "capi/capi_internal.hpp"

using kcache::capi::fail;
using kcache::capi::guarded;
using kcache::capi::invalid;

namespace {

// The C value's C++ enumerator; false for a value that is none.
bool attribute_of(kcache_kernel_attribute value, kcache::KernelAttribute& out) {
    switch (value) {
        case KCACHE_ATTRIBUTE_MAX_DYNAMIC_SHARED_BYTES:
            out = kcache::KernelAttribute::kMaxDynamicSharedBytes;
            return true;
        case KCACHE_ATTRIBUTE_PREFERRED_SHARED_CARVEOUT:
            out = kcache::KernelAttribute::kPreferredSharedCarveout;
            return true;
        case KCACHE_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
            out = kcache::KernelAttribute::kRequiredClusterWidth;
            return true;
        case KCACHE_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
            out = kcache::KernelAttribute::kRequiredClusterHeight;
            return true;
        case KCACHE_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
            out = kcache::KernelAttribute::kRequiredClusterDepth;
            return true;
        case KCACHE_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
            out = kcache::KernelAttribute::kNonPortableClusterSizeAllowed;
            return true;
        case KCACHE_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
            out = kcache::KernelAttribute::kClusterSchedulingPolicyPreference;
            return true;
    }
    return false;
}

bool cache_config_of(kcache_cache_config value, kcache::CacheConfig& out) {
    switch (value) {
        case KCACHE_PREFER_NONE:
            out = kcache::CacheConfig::kPreferNone;
            return true;
        case KCACHE_PREFER_SHARED:
            out = kcache::CacheConfig::kPreferShared;
            return true;
        case KCACHE_PREFER_L1:
            out = kcache::CacheConfig::kPreferL1;
            return true;
        case KCACHE_PREFER_EQUAL:
            out = kcache::CacheConfig::kPreferEqual;
            return true;
    }
    return false;
}

kcache_status done(const kcache::Result<void>& result) {
    return result ? KCACHE_OK : fail(result.error());
}

// One of a kernel's native handles into *out (NULL when the call fails).
kcache_status native_handle(const char* function, const kcache_kernel* kernel, void** out,
                            kcache::Result<void*> (kcache::KernelHandle::*get)() const) {
    if (out != nullptr) *out = nullptr;
    if (kernel == nullptr || out == nullptr) return invalid(function, "kernel or out is NULL");
    return guarded(function, [&] {
        auto found = (kernel->handle.*get)();
        if (!found) return fail(found.error());
        *out = *found;
        return KCACHE_OK;
    });
}

}  // namespace

extern "C" {

void kcache_launch_config_init(kcache_launch_config* config) {
    if (config == nullptr) return;
    *config = kcache_launch_config{};
    config->struct_size = sizeof(kcache_launch_config);
    for (int i = 0; i < 3; ++i) config->grid[i] = config->block[i] = 1;
}

kcache_status kcache_launch_ex(const kcache_kernel* kernel, const kcache_launch_config* config,
                               void** args, const size_t* sizes, size_t arg_count) {
    const char* function = "kcache_launch_ex";
    if (kernel == nullptr) return invalid(function, "kernel is NULL");
    if (config == nullptr) return invalid(function, "config is NULL");
    if (config->struct_size < offsetof(kcache_launch_config, cluster)) {
        return invalid(function, "config's struct_size is too small (kcache_launch_config_init)");
    }
    if (args == nullptr && arg_count != 0) return invalid(function, "args is NULL");
    // Only the fields the caller's struct holds are read.
    const auto has = [&](std::size_t end) { return config->struct_size >= end; };
    kcache::LaunchConfig launch;
    launch.grid = {config->grid[0], config->grid[1], config->grid[2]};
    launch.block = {config->block[0], config->block[1], config->block[2]};
    launch.shared_bytes = config->shared_bytes;
    launch.stream = config->stream;
    if (has(offsetof(kcache_launch_config, cooperative))) {
        launch.cluster = {config->cluster[0], config->cluster[1], config->cluster[2]};
    }
    if (has(offsetof(kcache_launch_config, programmatic_dependent_launch))) {
        launch.cooperative = config->cooperative != 0;
    }
    if (has(sizeof(kcache_launch_config))) {
        launch.programmatic_dependent_launch = config->programmatic_dependent_launch != 0;
    }
    return guarded(function, [&] {
        const std::span<void* const> values(args, arg_count);
        return done(sizes == nullptr
                        ? kernel->handle.launch(launch, values)
                        : kernel->handle.launch(launch, values,
                                                std::span<const std::size_t>(sizes, arg_count)));
    });
}

kcache_status kcache_kernel_set_attribute(const kcache_kernel* kernel,
                                          kcache_kernel_attribute attribute, int value) {
    const char* function = "kcache_kernel_set_attribute";
    if (kernel == nullptr) return invalid(function, "kernel is NULL");
    kcache::KernelAttribute which{};
    if (!attribute_of(attribute, which)) return invalid(function, "no such attribute");
    return guarded(function, [&] { return done(kernel->handle.set_attribute(which, value)); });
}

kcache_status kcache_kernel_set_cache_config(const kcache_kernel* kernel,
                                             kcache_cache_config config) {
    const char* function = "kcache_kernel_set_cache_config";
    if (kernel == nullptr) return invalid(function, "kernel is NULL");
    kcache::CacheConfig which{};
    if (!cache_config_of(config, which)) return invalid(function, "no such cache preference");
    return guarded(function, [&] { return done(kernel->handle.set_cache_config(which)); });
}

kcache_status kcache_kernel_native_function(const kcache_kernel* kernel, void** out) {
    return native_handle("kcache_kernel_native_function", kernel, out,
                         &kcache::KernelHandle::native_function);
}

kcache_status kcache_kernel_native_kernel(const kcache_kernel* kernel, void** out) {
    return native_handle("kcache_kernel_native_kernel", kernel, out,
                         &kcache::KernelHandle::native_kernel);
}

kcache_status kcache_module_global(const kcache_module* module, const char* name, uint64_t* address,
                                   size_t* size) {
    const char* function = "kcache_module_global";
    if (address != nullptr) *address = 0;
    if (size != nullptr) *size = 0;
    if (module == nullptr || name == nullptr || address == nullptr) {
        return invalid(function, "module, name or address is NULL");
    }
    return guarded(function, [&] {
        auto found = module->handle.global(name);
        if (!found) return fail(found.error());
        *address = found->address;
        if (size != nullptr) *size = found->size;
        return KCACHE_OK;
    });
}

}  // extern "C"
