// SPDX-License-Identifier: Apache-2.0
// The C API's lookups, handles and launches, prebuild and warm-up: each a thin call of the C++
// API with a C generator behind capi::call_generator.
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "capi/capi_internal.hpp"

namespace kcache::capi {
namespace {

kcache_status hand_out(Result<KernelHandle> handle, kcache_kernel** out) {
    if (!handle) return fail(handle.error());
    *out = new kcache_kernel{std::move(handle).value()};
    return KCACHE_OK;
}

kcache_status hand_out(Result<ModuleHandle> handle, kcache_module** out) {
    if (!handle) return fail(handle.error());
    auto module = std::make_unique<kcache_module>();
    module->fingerprint = handle->fingerprint();
    module->handle = std::move(handle).value();
    *out = module.release();
    return KCACHE_OK;
}

// kcache_launch's shape as a LaunchConfig; false when an array is missing.
bool launch_config(const uint32_t* grid, const uint32_t* block, uint32_t shared_bytes, void* stream,
                   LaunchConfig& config) {
    if (grid == nullptr || block == nullptr) return false;
    config.grid = {grid[0], grid[1], grid[2]};
    config.block = {block[0], block[1], block[2]};
    config.shared_bytes = shared_bytes;
    config.stream = stream;
    return true;
}

// The lookups' common arguments; a message for the first one missing.
const char* missing(const kcache_cache* cache, const char* key, kcache_make_source make,
                    const void* out) {
    if (cache == nullptr) return "cache is NULL";
    if (key == nullptr) return "key is NULL";
    if (make == nullptr) return "make (the source generator) is NULL";
    if (out == nullptr) return "out is NULL";
    return nullptr;
}

}  // namespace
}  // namespace kcache::capi

using kcache::capi::fail;
using kcache::capi::guarded;
using kcache::capi::invalid;

extern "C" {

kcache_status kcache_cache_get_kernel(kcache_cache* cache, const char* key, kcache_make_source make,
                                      void* user_data, const char* kernel_name,
                                      kcache_kernel** out) {
    const char* function = "kcache_cache_get_kernel";
    if (out != nullptr) *out = nullptr;
    if (const char* why = kcache::capi::missing(cache, key, make, out))
        return invalid(function, why);
    if (kernel_name == nullptr) return invalid(function, "kernel_name is NULL");
    return guarded(function, [&] {
        auto generate = [&] { return kcache::capi::call_generator(make, user_data); };
        return kcache::capi::hand_out(cache->cache->kernel(key, generate, kernel_name), out);
    });
}

kcache_status kcache_cache_get_module(kcache_cache* cache, const char* key, kcache_make_source make,
                                      void* user_data, kcache_module** out) {
    const char* function = "kcache_cache_get_module";
    if (out != nullptr) *out = nullptr;
    if (const char* why = kcache::capi::missing(cache, key, make, out))
        return invalid(function, why);
    return guarded(function, [&] {
        auto generate = [&] { return kcache::capi::call_generator(make, user_data); };
        return kcache::capi::hand_out(cache->cache->module(key, generate), out);
    });
}

kcache_status kcache_cache_get_or_compile(kcache_cache* cache, const char* key, const char* ptx,
                                          kcache_module** out) {
    const char* function = "kcache_cache_get_or_compile";
    if (out != nullptr) *out = nullptr;
    if (cache == nullptr || key == nullptr || ptx == nullptr || out == nullptr) {
        return invalid(function, "cache, key, ptx or out is NULL");
    }
    return guarded(function, [&] {
        return kcache::capi::hand_out(cache->cache->get_or_compile(key, ptx), out);
    });
}

kcache_status kcache_cache_compile_lock_launch(kcache_cache* cache, const char* key,
                                               const char* ptx, const char* kernel_name,
                                               const uint32_t grid[3], const uint32_t block[3],
                                               uint32_t shared_bytes, void* stream, void** args,
                                               size_t arg_count) {
    const char* function = "kcache_cache_compile_lock_launch";
    if (cache == nullptr || key == nullptr || ptx == nullptr || kernel_name == nullptr) {
        return invalid(function, "cache, key, ptx or kernel_name is NULL");
    }
    if (args == nullptr && arg_count != 0) return invalid(function, "args is NULL");
    kcache::LaunchConfig config;
    if (!kcache::capi::launch_config(grid, block, shared_bytes, stream, config)) {
        return invalid(function, "grid or block is NULL");
    }
    return guarded(function, [&] {
        auto launched = cache->cache->compile_lock_launch(key, ptx, kernel_name, config,
                                                          std::span<void* const>(args, arg_count));
        return launched ? KCACHE_OK : fail(launched.error());
    });
}

kcache_status kcache_module_get_kernel(const kcache_module* module, const char* kernel_name,
                                       kcache_kernel** out) {
    const char* function = "kcache_module_get_kernel";
    if (out == nullptr) return invalid(function, "out is NULL");
    *out = nullptr;
    if (module == nullptr || kernel_name == nullptr) {
        return invalid(function, "module or kernel_name is NULL");
    }
    return guarded(function,
                   [&] { return kcache::capi::hand_out(module->handle.kernel(kernel_name), out); });
}

const char* kcache_module_key(const kcache_module* module) {
    return module != nullptr ? module->handle.key().c_str() : "";
}

int kcache_module_arch(const kcache_module* module) {
    return module != nullptr ? module->handle.arch() : 0;
}

const char* kcache_module_fingerprint(const kcache_module* module) {
    return module != nullptr ? module->fingerprint.c_str() : "";
}

void kcache_module_release(kcache_module* module) {
    delete module;
}

const char* kcache_kernel_name(const kcache_kernel* kernel) {
    // A view of the resolved kernel's std::string, so NUL-terminated; it lives as the handle.
    return kernel != nullptr ? kernel->handle.name().data() : "";
}

int kcache_kernel_param_count(const kcache_kernel* kernel) {
    return kernel != nullptr ? kernel->handle.param_count() : -1;
}

kcache_status kcache_kernel_clone(const kcache_kernel* kernel, kcache_kernel** out) {
    if (out == nullptr) return invalid("kcache_kernel_clone", "out is NULL");
    *out = nullptr;
    if (kernel == nullptr) return invalid("kcache_kernel_clone", "kernel is NULL");
    return guarded("kcache_kernel_clone", [&] {
        *out = new kcache_kernel{kernel->handle};
        return KCACHE_OK;
    });
}

void kcache_kernel_release(kcache_kernel* kernel) {
    delete kernel;
}

kcache_status kcache_launch(const kcache_kernel* kernel, const uint32_t grid[3],
                            const uint32_t block[3], uint32_t shared_bytes, void* stream,
                            void** args, size_t arg_count) {
    const char* function = "kcache_launch";
    kcache::LaunchConfig config;
    if (kernel == nullptr) return invalid(function, "kernel is NULL");
    if (args == nullptr && arg_count != 0) return invalid(function, "args is NULL");
    if (!kcache::capi::launch_config(grid, block, shared_bytes, stream, config)) {
        return invalid(function, "grid or block is NULL");
    }
    return guarded(function, [&] {
        auto launched = kernel->handle.launch(config, std::span<void* const>(args, arg_count));
        return launched ? KCACHE_OK : fail(launched.error());
    });
}

kcache_status kcache_launch_sized(const kcache_kernel* kernel, const uint32_t grid[3],
                                  const uint32_t block[3], uint32_t shared_bytes, void* stream,
                                  void** args, const size_t* sizes, size_t arg_count) {
    const char* function = "kcache_launch_sized";
    kcache::LaunchConfig config;
    if (kernel == nullptr) return invalid(function, "kernel is NULL");
    if ((args == nullptr || sizes == nullptr) && arg_count != 0) {
        return invalid(function, "args or sizes is NULL");
    }
    if (!kcache::capi::launch_config(grid, block, shared_bytes, stream, config)) {
        return invalid(function, "grid or block is NULL");
    }
    return guarded(function, [&] {
        auto launched = kernel->handle.launch(config, std::span<void* const>(args, arg_count),
                                              std::span<const std::size_t>(sizes, arg_count));
        return launched ? KCACHE_OK : fail(launched.error());
    });
}

kcache_status kcache_cache_prebuild(kcache_cache* cache, const char* key, kcache_make_source make,
                                    void* user_data, int arch, kcache_provenance* provenance) {
    const char* function = "kcache_cache_prebuild";
    if (cache == nullptr || key == nullptr || make == nullptr) {
        return invalid(function, "cache, key or make is NULL");
    }
    return guarded(function, [&] {
        auto generate = [&] { return kcache::capi::call_generator(make, user_data); };
        auto built = cache->cache->prebuild(key, generate, arch);
        if (!built) return fail(built.error());
        if (provenance != nullptr) *provenance = kcache::capi::provenance_of(*built);
        return KCACHE_OK;
    });
}

kcache_status kcache_cache_warm_up(kcache_cache* cache, kcache_warm_up_item* items, size_t count,
                                   size_t item_size, unsigned threads) {
    const char* function = "kcache_cache_warm_up";
    if (cache == nullptr) return invalid(function, "cache is NULL");
    if (items == nullptr && count != 0) return invalid(function, "items is NULL");
    if (item_size < sizeof(kcache_warm_up_item)) {
        return invalid(function, "item_size is smaller than sizeof(kcache_warm_up_item)");
    }
    // Items are item_size apart, so that a caller built with a later, larger item still works.
    auto item = [&](std::size_t i) {
        return reinterpret_cast<kcache_warm_up_item*>(reinterpret_cast<char*>(items) +
                                                      i * item_size);
    };
    for (std::size_t i = 0; i < count; ++i) {
        item(i)->kernel = nullptr;
        item(i)->status = KCACHE_INVALID_ARGUMENT;
    }
    for (std::size_t i = 0; i < count; ++i) {
        if (item(i)->key == nullptr || item(i)->make == nullptr ||
            item(i)->kernel_name == nullptr) {
            const std::string why = "item " + std::to_string(i) + ": key, make or kernel_name NULL";
            return invalid(function, why.c_str());
        }
    }
    return guarded(function, [&] {
        std::vector<kcache::WarmUpItem> cpp;
        cpp.reserve(count);
        for (std::size_t i = 0; i < count; ++i) {
            const kcache_warm_up_item& given = *item(i);
            cpp.push_back({given.key,
                           [make = given.make, user_data = given.user_data] {
                               return kcache::capi::call_generator(make, user_data);
                           },
                           given.kernel_name});
        }
        auto results = cache->cache->warm_up(cpp, threads);
        kcache_status first = KCACHE_OK;
        std::size_t failed = 0;
        std::string failures;
        for (std::size_t i = 0; i < count; ++i) {
            kcache_warm_up_item& out = *item(i);
            if (results[i]) {
                out.kernel = new kcache_kernel{std::move(results[i]).value()};
                out.status = KCACHE_OK;
                continue;
            }
            out.status = kcache::capi::status_of(results[i].error().code());
            if (first == KCACHE_OK) first = out.status;
            ++failed;
            failures += "\n  item " + std::to_string(i) + ": " + results[i].error().describe();
        }
        if (failed == 0) return KCACHE_OK;
        kcache::capi::fail(first, std::to_string(failed) + " of " + std::to_string(count) +
                                      " items failed:" + failures);
        return first;
    });
}

}  // extern "C"
