// SPDX-License-Identifier: Apache-2.0
// What a cache counted, gathered from its own counters, its loaded modules and its tiers.
#include "cache/loaded_modules.hpp"

namespace kcache::cache {

CacheStats LoadedModules::stats() const {
    CacheStats s;
    s.hits = hits.sum();
    s.misses = misses_.load(std::memory_order_relaxed);
    s.compiles = compiles_.load(std::memory_order_relaxed);
    s.compile_failures = compile_failures_.load(std::memory_order_relaxed);
    s.code_gone = code_gone_.load(std::memory_order_relaxed);
    s.compile_ns = compile_ns_.load(std::memory_order_relaxed);
    s.waits = waits_.load(std::memory_order_relaxed);
    s.evictions = evictions_.load(std::memory_order_relaxed);
    s.verify_failures = verify_failures_.load(std::memory_order_relaxed);
    s.prebuilds = prebuilds_.load(std::memory_order_relaxed);
    s.prebuild_compiles = prebuild_compiles_.load(std::memory_order_relaxed);
    s.entries = size();
    // Unloads first: every unload counted was preceded by its load, so loaded >= unloaded.
    const auto unloaded = module_counters_->unloaded.load(std::memory_order_acquire);
    s.loaded_libraries = module_counters_->loaded.load(std::memory_order_acquire) - unloaded;
    if (const store::ArtifactStore* tiers = builder_.tiers().get()) {
        const store::ArtifactStats t = tiers->stats();
        s.memory_hits = t.memory_hits;
        s.read_backs = t.read_backs;
        s.disk_enabled = t.disk_enabled;
        s.disk_read_only = tiers->disk() != nullptr && tiers->disk()->read_only();
        s.disk_hits = t.disk.hits;
        s.disk_misses = t.disk.misses;
        s.disk_rejected = t.disk_rejected;
        s.disk_writes = t.disk.writes;
        s.disk_errors = t.disk.errors;
        s.disk_corrupt = t.disk.corrupt;
        s.disk_evicted = t.disk.evicted;
        s.disk_evicted_bytes = t.disk.evicted_bytes;
#define KCACHE_COPY_REMOTE(name) s.remote_##name = t.remote.name;
        KCACHE_REMOTE_COUNTERS(KCACHE_COPY_REMOTE)
#undef KCACHE_COPY_REMOTE
        s.remote_enabled = t.remote_enabled;
    }
    if (builder_.disk_open_error()) s.disk_errors += 1;
    s.config_errors = options.configuration_problems.size();
    return s;
}

}  // namespace kcache::cache
