// SPDX-License-Identifier: Apache-2.0
// The C API's caches: options, creation (given, from the environment, the global one),
// statistics, clearing and the exclusive guard, and the seed's per-thread counters.
#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>

#include "capi/capi_internal.hpp"
// The one list of the counters CacheStats shares with the persistent statistics (a macro only):
// a counter added there that kcache_stats lacks fails to compile below.
#include "store/persistent_stats.hpp"

namespace kcache::capi {

kcache_cache* wrap(CacheOptions options) {
    auto cache = std::make_unique<kcache_cache>();
    cache->owned = std::make_unique<KernelCache>(std::move(options));
    cache->cache = cache->owned.get();
    return cache.release();
}

namespace {

kcache_options defaults() {
    const CacheOptions cpp;
    kcache_options c{};
    c.struct_size = sizeof(kcache_options);
    c.max_entries = cpp.max_entries;
    c.verify = cpp.verify ? 1 : 0;
    c.host_compile = cpp.host_compile ? 1 : 0;
    c.memory_bytes = cpp.memory_bytes;
    c.disk_directory = nullptr;
    c.read_only = cpp.read_only ? 1 : 0;
    c.remote = nullptr;
    c.compile_workers = cpp.compile_workers;
    c.disk_max_bytes = cpp.disk_max_bytes;
    c.disk_max_files = cpp.disk_max_files;
    c.bundle_warm_ups = cpp.bundle_warm_ups ? 1 : 0;
    return c;
}

CacheOptions to_cpp(const kcache_options& c) {
    CacheOptions cpp;
    cpp.max_entries = c.max_entries;
    cpp.verify = c.verify != 0;
    cpp.host_compile = c.host_compile != 0;
    cpp.memory_bytes = static_cast<std::size_t>(c.memory_bytes);
    cpp.disk_directory = c.disk_directory != nullptr ? c.disk_directory : "";
    cpp.read_only = c.read_only != 0;
    cpp.remote = c.remote != nullptr ? c.remote : "";
    cpp.compile_workers = c.compile_workers;
    cpp.disk_max_bytes = c.disk_max_bytes;
    cpp.disk_max_files = c.disk_max_files;
    cpp.bundle_warm_ups = c.bundle_warm_ups != 0;
    return cpp;
}

kcache_stats to_c(const CacheStats& s) {
    kcache_stats c{};
    c.struct_size = sizeof(kcache_stats);
#define KCACHE_C_STATS_COPY(name, unit, group, label) c.name = s.name;
    KCACHE_STATS_COUNTERS(KCACHE_C_STATS_COPY)
#undef KCACHE_C_STATS_COPY
    // Gauges and counters kept for this process only.
    c.code_gone = s.code_gone;
    c.entries = s.entries;
    c.loaded_libraries = s.loaded_libraries;
    c.read_backs = s.read_backs;
    c.disk_enabled = s.disk_enabled ? 1 : 0;
    c.disk_read_only = s.disk_read_only ? 1 : 0;
    c.remote_enabled = s.remote_enabled ? 1 : 0;
    return c;
}

// A caller's struct of `size` bytes, of which the first field is that size: the bytes kcache
// knows, up to `size`, so that an older caller's smaller struct is filled as far as it reaches.
template <class Struct>
void copy_prefix(Struct& to, const Struct& from, std::size_t size) {
    const std::size_t n = std::min(size, sizeof(Struct));
    std::memcpy(reinterpret_cast<char*>(&to) + sizeof(std::size_t),
                reinterpret_cast<const char*>(&from) + sizeof(std::size_t),
                n - sizeof(std::size_t));
}

}  // namespace
}  // namespace kcache::capi

using kcache::capi::guarded;
using kcache::capi::invalid;

extern "C" {

void kcache_options_init(kcache_options* options) {
    if (options != nullptr) *options = kcache::capi::defaults();
}

kcache_status kcache_cache_create(const kcache_options* options, kcache_cache** out) {
    const char* function = "kcache_cache_create";
    if (out == nullptr) return invalid(function, "out is NULL");
    *out = nullptr;
    if (options == nullptr) return invalid(function, "options is NULL");
    if (options->struct_size < sizeof(std::size_t)) {
        return invalid(function, "options->struct_size is not set (kcache_options_init sets it)");
    }
    return guarded(function, [&] {
        kcache_options given = kcache::capi::defaults();
        kcache::capi::copy_prefix(given, *options, options->struct_size);
        kcache::CacheOptions cpp = kcache::capi::to_cpp(given);
        if (auto checked = cpp.check(); !checked) return kcache::capi::fail(checked.error());
        *out = kcache::capi::wrap(std::move(cpp));
        return KCACHE_OK;
    });
}

kcache_status kcache_cache_create_from_env(kcache_cache** out) {
    if (out == nullptr) return invalid("kcache_cache_create_from_env", "out is NULL");
    *out = nullptr;
    return guarded("kcache_cache_create_from_env", [&] {
        auto options = kcache::CacheOptions::from_env();
        if (!options) return kcache::capi::fail(options.error());
        *out = kcache::capi::wrap(std::move(options).value());
        return KCACHE_OK;
    });
}

kcache_status kcache_cache_global(kcache_cache** out) {
    if (out == nullptr) return invalid("kcache_cache_global", "out is NULL");
    *out = nullptr;
    return guarded("kcache_cache_global", [&] {
        // Never destroyed, as the cache it lends.
        static kcache_cache* const global = new kcache_cache{&kcache::KernelCache::global(), {}};
        *out = global;
        return KCACHE_OK;
    });
}

void kcache_cache_destroy(kcache_cache* cache) {
    if (cache == nullptr || cache->owned == nullptr) return;  // NULL, or the borrowed global
    delete cache;  // a cache's destructor throws nothing: it flushes, and logs what fails
}

kcache_status kcache_cache_stats(const kcache_cache* cache, kcache_stats* out) {
    const char* function = "kcache_cache_stats";
    if (cache == nullptr || out == nullptr) return invalid(function, "cache or out is NULL");
    if (out->struct_size < sizeof(std::size_t)) {
        return invalid(function, "out->struct_size is not set (sizeof(kcache_stats))");
    }
    return guarded(function, [&] {
        const kcache_stats full = kcache::capi::to_c(cache->cache->stats());
        kcache::capi::copy_prefix(*out, full, out->struct_size);
        return KCACHE_OK;
    });
}

kcache_status kcache_cache_clear(kcache_cache* cache) {
    if (cache == nullptr) return invalid("kcache_cache_clear", "cache is NULL");
    return guarded("kcache_cache_clear", [&] {
        cache->cache->clear();
        return KCACHE_OK;
    });
}

size_t kcache_cache_size(const kcache_cache* cache) {
    if (cache == nullptr) return 0;
    try {
        return cache->cache->size();
    } catch (...) {
        return 0;
    }
}

kcache_status kcache_cache_exclusive(kcache_cache* cache, kcache_exclusive** out) {
    const char* function = "kcache_cache_exclusive";
    if (out == nullptr) return invalid(function, "out is NULL");
    *out = nullptr;
    if (cache == nullptr) return invalid(function, "cache is NULL");
    return guarded(function, [&] {
        *out = new kcache_exclusive{cache->cache->exclusive()};
        return KCACHE_OK;
    });
}

kcache_status kcache_exclusive_clear(kcache_exclusive* guard) {
    if (guard == nullptr) return invalid("kcache_exclusive_clear", "guard is NULL");
    return guarded("kcache_exclusive_clear", [&] {
        guard->guard.clear();
        return KCACHE_OK;
    });
}

void kcache_exclusive_release(kcache_exclusive* guard) {
    delete guard;
}

void kcache_thread_stats(uint64_t* hits, uint64_t* misses) {
    const kcache::ThreadStats stats = kcache::thread_stats();
    if (hits != nullptr) *hits = stats.hits;
    if (misses != nullptr) *misses = stats.misses;
}

void kcache_reset_thread_stats(void) {
    kcache::reset_thread_stats();
}

}  // extern "C"
