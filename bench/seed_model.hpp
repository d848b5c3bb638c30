// SPDX-License-Identifier: Apache-2.0
// A faithful C++ model of the seed's kernel cache (shared/seed/kernel_cache.rs.txt), for side by
// side benchmarks: one global mutex around a string-keyed hash map of shared modules, and a
// per-module mutex held through the launch, with the kernel looked up by name at every launch.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "driver/driver.hpp"

namespace kcache::bench {

class SeedModelCache {
public:
    struct Module {
        std::mutex mutex;  // the seed's Mutex<CudaModule>, held through every launch
        driver::ModuleId library{};
        std::unordered_map<std::string, driver::KernelId> functions;  // guarded by mutex
    };

    explicit SeedModelCache(std::shared_ptr<driver::Driver> driver) : driver_(std::move(driver)) {}
    ~SeedModelCache();

    // get_or_compile_kernel: lock, look up, clone the Arc; on a miss compile unlocked, insert.
    Result<std::shared_ptr<Module>> get_or_compile(std::string_view key, std::string_view ptx);

    // compile_lock_launch: the above, then lock the module for the launch.
    Result<void> compile_lock_launch(std::string_view key, std::string_view ptx,
                                     std::string_view kernel_name, const LaunchConfig& config,
                                     void** args);

private:
    std::shared_ptr<driver::Driver> driver_;
    std::mutex mutex_;  // the seed's global KERNEL_CACHE mutex
    std::unordered_map<std::string, std::shared_ptr<Module>> map_;
};

}  // namespace kcache::bench
