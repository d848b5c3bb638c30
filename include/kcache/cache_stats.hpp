// SPDX-License-Identifier: Apache-2.0
// What a KernelCache counted (CacheStats), and the seed's per-thread counters (ThreadStats).
#pragma once

#include <cstdint>

namespace kcache {

// What a cache counted. Lookups (kernel(), module(), warm_up()) are hits or misses; a miss that
// reached the tiers ended as exactly one of memory_hits, disk_hits or disk_misses (with a disk
// tier). prebuild() is no lookup: it counts in prebuilds, and in compiles when it compiled.
// The counters kept across processes (for `kcache -s`) are listed once, by these field names, in
// KCACHE_STATS_COUNTERS (src/store/persistent_stats.hpp); a new one needs a field here too.
struct CacheStats {
    std::uint64_t hits = 0;
    std::uint64_t misses = 0;
    // Sources compiled successfully: for lookups (and loaded), and for prebuilds (of which
    // prebuild_compiles).
    std::uint64_t compiles = 0;
    std::uint64_t compile_failures = 0;  // never cached
    std::uint64_t compile_ns = 0;        // time spent compiling, failures included
    std::uint64_t waits = 0;             // lookups that waited for another thread's compile
    std::uint64_t evictions = 0;
    std::uint64_t verify_failures = 0;
    // Loaded entries dropped because their code could not reach a new context any more (its
    // bytes had left the tiers); each is built again at the next lookup of its key.
    std::uint64_t code_gone = 0;
    std::uint64_t entries = 0;           // entries in the map now
    std::uint64_t loaded_libraries = 0;  // loaded now, evicted-but-still-held ones included
    // The artifact tiers: lookups' misses served without compiling.
    std::uint64_t memory_hits = 0;
    std::uint64_t disk_hits = 0;
    // Entries read again (not lookups): the bytes of code loaded without keeping them, for a
    // context new to it.
    std::uint64_t read_backs = 0;
    std::uint64_t disk_misses = 0;  // lookups' misses neither tier served
    // Of disk_misses: an entry under the fingerprint held other key material (recompiled).
    std::uint64_t disk_rejected = 0;
    std::uint64_t disk_writes = 0;
    std::uint64_t disk_errors = 0;   // I/O failures, and a disk directory that could not be used
    std::uint64_t disk_corrupt = 0;  // entries that failed their checks, removed
    std::uint64_t disk_evicted = 0;  // entries removed to keep the disk budgets, by this cache
    std::uint64_t disk_evicted_bytes = 0;
    std::uint64_t prebuilds = 0;          // prebuild() calls that reached the tiers
    std::uint64_t prebuild_compiles = 0;  // of them, compiled (the rest were stored already)
    // Settings that could not be used (CacheOptions::configuration_problems).
    std::uint64_t config_errors = 0;
    bool disk_enabled = false;
    bool disk_read_only = false;  // the disk tier is read, never written
    // The remote tier (Redis): lookups it served or not after the disk tier missed, and what its
    // servers and uploads did; `remote.` in `kcache -s`.
    std::uint64_t remote_hits = 0;               // lookups a remote value served
    std::uint64_t remote_misses = 0;             // lookups no backend had a good value for
    std::uint64_t remote_errors = 0;             // requests that failed (timeouts apart)
    std::uint64_t remote_timeouts = 0;           // requests past a deadline
    std::uint64_t remote_skipped = 0;            // requests not sent: the server was set aside
    std::uint64_t remote_corrupt = 0;            // values that failed their checks (never loaded)
    std::uint64_t remote_signature_rejects = 0;  // unsigned, forged or replayed where signed needed
    std::uint64_t remote_too_large = 0;          // values over the size cap
    std::uint64_t remote_writes = 0;             // values stored
    std::uint64_t remote_writes_exists = 0;      // writes that lost the SET NX race (already there)
    std::uint64_t remote_write_errors = 0;       // writes refused (OOM, NOPERM)
    std::uint64_t remote_writes_dropped = 0;     // writes never sent (queue full, exit)
    std::uint64_t remote_breaker_openings = 0;   // times a server was set aside
    std::uint64_t remote_lease_won = 0;          // compiles led for the fleet
    std::uint64_t remote_lease_waited = 0;       // compiles another node led, waited for
    std::uint64_t remote_lease_wait_timeouts = 0;  // waits that ran out (compiled here after all)
    std::uint64_t remote_lease_takeovers = 0;      // leases taken after their holder's expired
    std::uint64_t remote_bytes_in = 0;
    std::uint64_t remote_bytes_out = 0;
    bool remote_enabled = false;
};

// The seed's per-thread counters: hits and misses of the calling thread only, across caches,
// since its last reset. Another thread's work never shows here.
struct ThreadStats {
    std::uint64_t hits = 0;
    std::uint64_t misses = 0;
};
ThreadStats thread_stats() noexcept;
void reset_thread_stats() noexcept;

}  // namespace kcache
