// SPDX-License-Identifier: Apache-2.0
// Delta computation and flush policy of StatsFlusher: the persistent statistics receive each
// count once, whatever the number of flushes and whether some of them failed.
#include "cache/stats_flusher.hpp"

#include <utility>

#include "util/log.hpp"

namespace kcache::cache {

store::StatsCounters counters_of(const CacheStats& stats) noexcept {
    store::StatsCounters c;
    // By name from the one list: a counter without its CacheStats field does not compile.
#define KCACHE_COPY_COUNTER(name, unit, group, label) c.name = stats.name;
    KCACHE_STATS_COUNTERS(KCACHE_COPY_COUNTER)
#undef KCACHE_COPY_COUNTER
    return c;
}

store::StatsCounters growth(const store::StatsCounters& now,
                            const store::StatsCounters& before) noexcept {
    store::StatsCounters out;
    for (const store::StatsField& field : store::stats_fields()) {
        const std::uint64_t a = now.*(field.member);
        const std::uint64_t b = before.*(field.member);
        out.*(field.member) = a >= b ? a - b : a;
    }
    return out;
}

StatsFlusher::StatsFlusher(Source source, store::PersistentStats target,
                           std::chrono::nanoseconds interval)
    : source_(std::move(source)),
      target_(std::move(target)),
      interval_ns_(interval.count()),
      next_due_ns_(now_ns() + interval_ns_) {}

StatsFlusher::~StatsFlusher() {
    (void)flush();  // a failure was logged by flush(); a destructor has nobody to tell
}

std::int64_t StatsFlusher::now_ns() const noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

void StatsFlusher::maybe_flush() {
    const std::int64_t now = now_ns();
    if (now < next_due_ns_.load(std::memory_order_relaxed)) return;
    std::unique_lock lock(flush_mutex_, std::try_to_lock);
    if (!lock.owns_lock()) return;  // another thread is flushing: this one's counts go with it
    // Re-checked under the lock: a thread that loaded the old due time may get here just after
    // another one flushed and released.
    if (now < next_due_ns_.load(std::memory_order_relaxed)) return;
    // Due again one interval from now whatever the outcome: a failing directory is then retried
    // once per interval, not on every miss.
    next_due_ns_.store(now + interval_ns_, std::memory_order_relaxed);
    (void)flush_locked(kPeriodicPatience);  // logged there; the growth waits for the next flush
}

Result<void> StatsFlusher::flush() {
    std::lock_guard lock(flush_mutex_);
    next_due_ns_.store(now_ns() + interval_ns_, std::memory_order_relaxed);
    return flush_locked(store::kStatsLockPatience);
}

Result<void> StatsFlusher::flush_locked(std::chrono::milliseconds patience) {
    const store::StatsCounters now = counters_of(source_());
    const store::StatsCounters delta = growth(now, sent_);
    if (delta == store::StatsCounters{}) return ok();  // nothing new: no lock, no write
    auto added = target_.add(delta, patience);
    if (!added) {
        util::log_line(
            util::LogLevel::kInfo,
            "statistics not recorded yet (kept for the next flush): " + added.error().message());
        return added;
    }
    sent_ = now;
    return ok();
}

}  // namespace kcache::cache
