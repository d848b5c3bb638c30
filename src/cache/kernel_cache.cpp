// SPDX-License-Identifier: Apache-2.0
// KernelCache: the public face of LoadedModules, plus configuration and the per-thread counters.
#include "kcache/kernel_cache.hpp"

#include <cstdlib>

#include "cache/key_context.hpp"
#include "cache/loaded_modules.hpp"
#include "cache/options_from_config.hpp"
#include "cache/settings.hpp"
#include "cache/thread_counters.hpp"
#include "driver/driver.hpp"
#include "util/config.hpp"
#include "util/log.hpp"
#include "util/try.hpp"

namespace kcache {

Result<CacheOptions> CacheOptions::from_env() {
    // The environment over kcache.conf in the cache directory over the defaults (util/config).
    auto config = cache::load_settings({});
    if (!config) return config.error();
    if (!config->problems().empty()) {
        return Error(Errc::kInvalidArgument, config->problems().front());
    }
    return cache::to_cache_options(*config);
}

CacheOptions CacheOptions::from_env_lenient() {
    auto config = cache::load_settings({});
    auto options = config ? cache::to_cache_options(*config) : Result<CacheOptions>(config.error());
    if (options) return std::move(options).value();
    CacheOptions defaults;  // only a settings table that to_cache_options disagrees with gets here
    defaults.configuration_problems.push_back(options.error().message());
    return defaults;
}

Result<void> CacheOptions::check() const {
    if (compile_workers > kMaxCompileWorkers) {
        return Error(Errc::kInvalidArgument,
                     "compile_workers: " + std::to_string(compile_workers) + " is more than " +
                         std::to_string(kMaxCompileWorkers) + " worker processes");
    }
    return ok();
}

ThreadStats thread_stats() noexcept {
    return cache::thread_counters();
}
void reset_thread_stats() noexcept {
    cache::thread_counters() = {};
}

KernelCache::KernelCache(CacheOptions options) {
    cache::apply_environment_log_setting();  // before the cache's first warning
    modules_ = std::make_unique<cache::LoadedModules>(std::move(options));
}

KernelCache::~KernelCache() = default;

KernelCache& KernelCache::global() {
    // Leaked on purpose: kernels may be launched from static destructors, after which unloading
    // libraries from a dying CUDA context would only add failures.
    static KernelCache* cache = [] { return new KernelCache(CacheOptions::from_env_lenient()); }();
    // The leaked cache is never destroyed, so its statistics are flushed at exit; registered
    // after it is built, so this runs before the statics it was built on are destroyed.
    static const bool flush_at_exit = [] {
        std::atexit([] { cache->modules_->at_exit(); });
        return true;
    }();
    (void)flush_at_exit;
    return *cache;
}

Result<KernelHandle> KernelCache::kernel_impl(std::string_view key, SourceFn make_source,
                                              std::string_view kernel_name,
                                              std::optional<cache::PreparedArtifact>* prepared) {
    driver::Driver& driver = modules_->driver();
    if (!modules_->options.verify) {
        // Where every device of the process has one arch (the usual GPU node), a hit needs no
        // driver call at all: the arch is known without asking which context is current.
        if (const int uniform = driver.uniform_arch(); uniform != 0) {
            if (auto handle = modules_->find_kernel(key, uniform, kernel_name)) {
                return std::move(*handle);
            }
        }
    }
    // Misses (and verification) need a current context: the compile resolves kernels in it.
    TRY_ASSIGN(const int arch, driver.current_arch());
    if (!modules_->options.verify && driver.uniform_arch() == 0) {
        if (auto handle = modules_->find_kernel(key, arch, kernel_name)) return std::move(*handle);
    }
    auto module = modules_->module_slow(key, make_source, arch, prepared);
    if (!module) return cache::with_key(key, module.error());
    auto kernel = module->kernel(kernel_name);
    if (!kernel && kernel.error().code() == Errc::kArtifactGone) {
        // Code loaded without its bytes, which left the tiers before this context needed them:
        // dropped, and built again now, once.
        modules_->discard(*module);
        module = modules_->module_slow(key, make_source, arch);
        if (!module) return cache::with_key(key, module.error());
        kernel = module->kernel(kernel_name);
    }
    if (!kernel && kernel.error().code() == Errc::kCompileFailed) modules_->discard(*module);
    return kernel;
}

Result<ModuleHandle> KernelCache::module_impl(std::string_view key, SourceFn make_source) {
    TRY_ASSIGN(const int arch, modules_->driver().current_arch());
    return cache::with_key(key, modules_->module_slow(key, make_source, arch));
}

Result<Provenance> KernelCache::prebuild_impl(std::string_view key, SourceFn make_source,
                                              int arch) {
    return cache::with_key(key, modules_->prebuild(key, make_source, arch));
}

Result<ModuleHandle> KernelCache::get_or_compile(std::string_view key, std::string_view ptx) {
    return module(key, [&] { return Source::ptx(std::string(ptx)); });
}

Result<void> KernelCache::compile_lock_launch(std::string_view key, std::string_view ptx,
                                              std::string_view kernel_name,
                                              const LaunchConfig& config,
                                              std::span<void* const> args) {
    return launch(
        key, [&] { return Source::ptx(std::string(ptx)); }, kernel_name, config, args);
}

void KernelCache::clear() {
    std::lock_guard lock(modules_->clear_mutex);
    modules_->clear_locked();
}

ExclusiveGuard KernelCache::exclusive() {
    return ExclusiveGuard(*this, std::unique_lock(modules_->clear_mutex));
}

void ExclusiveGuard::clear() {
    cache_->modules_->clear_locked();
}

CacheStats KernelCache::stats() const {
    return modules_->stats();
}
void KernelCache::wait_for_uploads() {
    modules_->wait_for_uploads();
}
std::size_t KernelCache::size() const {
    return modules_->size();
}
const CacheOptions& KernelCache::options() const noexcept {
    return modules_->options;
}

}  // namespace kcache
