// SPDX-License-Identifier: Apache-2.0
#include "bench/seed_model.hpp"

namespace kcache::bench {

SeedModelCache::~SeedModelCache() {
    for (auto& [key, module] : map_) driver_->unload_module(module->library);
}

Result<std::shared_ptr<SeedModelCache::Module>> SeedModelCache::get_or_compile(
    std::string_view key, std::string_view ptx) {
    {
        std::lock_guard lock(mutex_);
        // The seed's HashMap<String, _>::get(&str) hashes the borrowed key; std::unordered_map
        // needs an owning key, which is what a C++ port of it would build.
        auto it = map_.find(std::string(key));
        if (it != map_.end()) return it->second;
    }
    auto library = driver_->load_module(Source::ptx(std::string(ptx)));
    if (!library) return library.error();
    auto module = std::make_shared<Module>();
    module->library = *library;
    std::lock_guard lock(mutex_);
    map_[std::string(key)] = module;
    return module;
}

Result<void> SeedModelCache::compile_lock_launch(std::string_view key, std::string_view ptx,
                                                 std::string_view kernel_name,
                                                 const LaunchConfig& config, void** args) {
    auto module = get_or_compile(key, ptx);
    if (!module) return module.error();
    std::lock_guard lock((*module)->mutex);
    auto& functions = (*module)->functions;
    std::string name(kernel_name);
    auto it = functions.find(name);
    if (it == functions.end()) {
        auto kernel = driver_->get_kernel((*module)->library, name);
        if (!kernel) return kernel.error();
        it = functions.emplace(name, *kernel).first;
    }
    return driver_->launch(it->second, config, args);
}

}  // namespace kcache::bench
