// SPDX-License-Identifier: Apache-2.0
// What the remote tier counts, as atomics its servers and queue add to, and as a snapshot.
#pragma once

#include <atomic>
#include <cstdint>

namespace kcache::store::remote {

// name: what it counts. One list: the snapshot, the counters and their sum are made from it.
#define KCACHE_REMOTE_COUNTERS(X)                                                                 \
    X(hits)                /* lookups a remote value served */                                    \
    X(misses)              /* lookups no backend had a good value for */                          \
    X(errors)              /* requests that failed (connect, I/O, protocol), timeouts excluded */ \
    X(timeouts)            /* requests past a deadline */                                         \
    X(skipped)             /* requests not sent: the server's breaker was open */                 \
    X(corrupt)             /* values that failed their checks (a miss, never loaded) */           \
    X(signature_rejects)   /* values unsigned, forged or replayed where a signature was needed */ \
    X(too_large)           /* values over the size cap, not stored or not read */                 \
    X(writes)              /* values stored */                                                    \
    X(writes_exists)       /* writes that found the value there already (lost the NX race) */     \
    X(write_errors)        /* writes the server refused (OOM, NOPERM) or that failed */           \
    X(writes_dropped)      /* writes never sent: the queue was full, or the process exited */     \
    X(breaker_openings)    /* times a server was set aside */                                     \
    X(lease_won)           /* compiles this process led for the fleet */                          \
    X(lease_waited)        /* compiles another node led: waited for its value */                  \
    X(lease_wait_timeouts) /* waits that ran out: compiled here after all */                      \
    X(lease_takeovers)     /* leases taken after their holder's expired */                        \
    X(bytes_in)                                                                                   \
    X(bytes_out)

struct RemoteStats {
#define KCACHE_REMOTE_MEMBER(name) std::uint64_t name = 0;
    KCACHE_REMOTE_COUNTERS(KCACHE_REMOTE_MEMBER)
#undef KCACHE_REMOTE_MEMBER
};

struct RemoteCounters {
#define KCACHE_REMOTE_MEMBER(name) std::atomic<std::uint64_t> name{0};
    KCACHE_REMOTE_COUNTERS(KCACHE_REMOTE_MEMBER)
#undef KCACHE_REMOTE_MEMBER

    static void add(std::atomic<std::uint64_t>& counter, std::uint64_t n = 1) noexcept {
        counter.fetch_add(n, std::memory_order_relaxed);
    }
    RemoteStats snapshot() const noexcept {
        RemoteStats s;
#define KCACHE_REMOTE_READ(name) s.name = name.load(std::memory_order_relaxed);
        KCACHE_REMOTE_COUNTERS(KCACHE_REMOTE_READ)
#undef KCACHE_REMOTE_READ
        return s;
    }
};

}  // namespace kcache::store::remote
