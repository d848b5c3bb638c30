// SPDX-License-Identifier: Apache-2.0
// Carries a cache's in-process counters to its directory's persistent statistics: only what grew
// since the last flush that reached the file, at most once per interval, and the rest at the end.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>

#include "kcache/kernel_cache.hpp"
#include "kcache/result.hpp"
#include "store/persistent_stats.hpp"

namespace kcache::cache {

// The counters of `stats` (KCACHE_STATS_COUNTERS); its gauges (entries, loaded libraries,
// disk_enabled) and what is not kept across processes (code_gone, read_backs) are left out.
store::StatsCounters counters_of(const CacheStats& stats) noexcept;

// `now - before`, field by field. A field that went down (a source that restarted from zero)
// counts whole: its new value is all growth since the restart.
store::StatsCounters growth(const store::StatsCounters& now,
                            const store::StatsCounters& before) noexcept;

class StatsFlusher {
public:
    using Source = std::function<CacheStats()>;  // the cache's cumulative counters

    // How long a periodic flush waits for its shard's lock: it runs on a caller's miss path,
    // so it gives up early and leaves the growth to the next flush.
    static constexpr std::chrono::milliseconds kPeriodicPatience{100};

    // `source` is called from maybe_flush() and flush(), the destructor included, on whichever
    // thread calls them: it must stay callable until this flusher is destroyed.
    StatsFlusher(Source source, store::PersistentStats target,
                 std::chrono::nanoseconds interval = std::chrono::seconds(1));
    ~StatsFlusher();  // a final flush(); its failure is logged
    StatsFlusher(const StatsFlusher&) = delete;
    StatsFlusher& operator=(const StatsFlusher&) = delete;

    // For the miss path. When not due, one relaxed atomic load and a clock read. When due, one
    // thread flushes (with kPeriodicPatience) while the others that find it due go on at once.
    void maybe_flush();

    // Flushes now, waiting for a flush in progress and up to kStatsLockPatience for the lock.
    // On failure the growth stays unsent and goes with the next flush; the error is logged as
    // well as returned, so callers may ignore it.
    Result<void> flush();

private:
    Result<void> flush_locked(std::chrono::milliseconds patience);  // requires flush_mutex_
    std::int64_t now_ns() const noexcept;

    const Source source_;
    const store::PersistentStats target_;
    const std::int64_t interval_ns_;
    // steady_clock time (ns) before which maybe_flush() does nothing. Relaxed: it orders nothing
    // (flush_mutex_ guards the data); a stale value costs at most one try_lock or one late flush.
    std::atomic<std::int64_t> next_due_ns_;
    std::mutex flush_mutex_;       // serialises flushes
    store::StatsCounters sent_{};  // guarded by flush_mutex_: what has reached the file
};

}  // namespace kcache::cache
