// The writers of the published map: publish, evict over budget, discard and clear. Each swaps
// in a new table under the writers' lock and retires the old one through the epoch domain, so
// that readers on the hit path never wait.
#include <algorithm>

#include "cache/cache_core.hpp"
#include "cache/thread_counters.hpp"
#include "util/epoch.hpp"
#include "util/log.hpp"

namespace kcache::cache {
namespace {

std::string describe_key(std::string_view key, int arch) {
    return std::string(key) + " (sm_" + std::to_string(arch) + ")";
}

}  // namespace

void CacheCore::discard(const ModuleHandle& module) {
    Entry* entry = module.entry_;
    {
        std::lock_guard lock(write_mutex_);
        const EntryTable* table = table_.load(std::memory_order_relaxed);
        std::vector<Entry*> kept;
        kept.reserve(table->size());
        for (Entry* e : table->entries()) {
            if (e != entry) kept.push_back(e);
        }
        if (kept.size() == table->size()) return;  // already gone (evicted, cleared)
        replace_table(new EntryTable(kept));
    }
    if (entry->broken_because() == Errc::kArtifactGone) {
        code_gone_.fetch_add(1, std::memory_order_relaxed);
        util::log_line(util::LogLevel::kInfo,
                       "discarded " + describe_key(entry->key, entry->arch) +
                           ": its bytes left the tiers before another context needed them; the "
                           "next lookup builds it again");
    } else {
        compile_failures_.fetch_add(1, std::memory_order_relaxed);
        util::log_line(util::LogLevel::kInfo,
                       "discarded " + describe_key(entry->key, entry->arch) + ": its JIT failed");
    }
    entry->retire();  // unloaded once the caller's handle goes
}

std::vector<Entry*> CacheCore::publish(Entry* entry) {
    entry->last_used.store(tick_.fetch_add(1, std::memory_order_relaxed) + 1,
                           std::memory_order_relaxed);
    EntryTable* table = table_.load(std::memory_order_relaxed);
    if (!table->try_insert(entry)) {  // full enough: a bigger table, with room to grow in place
        std::vector<Entry*> entries = table->entries();
        entries.push_back(entry);
        replace_table(new EntryTable(entries));
    }
    return evict_over_budget();
}

std::vector<Entry*> CacheCore::evict_over_budget() {
    const std::size_t budget = std::max<std::size_t>(1, options.max_entries);
    const EntryTable* table = table_.load(std::memory_order_relaxed);
    if (table->size() <= budget) return {};

    // Least recently used first, and among those, entries no handle holds: evicting a held one
    // frees nothing until its handles go. Other threads take and drop handles and mark recency
    // while we sort, so the sort works on a snapshot: a comparator reading live values would
    // be inconsistent, which std::sort punishes by running off the end of the range.
    struct Candidate {
        Entry* entry;
        bool held;
        std::uint64_t last_used;
    };
    std::vector<Candidate> order;
    order.reserve(table->size());
    for (Entry* entry : table->entries()) {
        order.push_back(
            {entry, entry->referenced(), entry->last_used.load(std::memory_order_relaxed)});
    }
    std::sort(order.begin(), order.end(), [](const Candidate& a, const Candidate& b) {
        if (a.held != b.held) return !a.held;
        return a.last_used < b.last_used;
    });
    const std::size_t excess = order.size() - budget;
    std::vector<Entry*> victims;
    std::vector<Entry*> kept;
    for (std::size_t i = 0; i < order.size(); ++i) {
        (i < excess ? victims : kept).push_back(order[i].entry);
    }
    replace_table(new EntryTable(kept));
    evictions_.fetch_add(victims.size(), std::memory_order_relaxed);
    return victims;
}

void CacheCore::replace_table(EntryTable* table) {
    const EntryTable* old = table_.exchange(table, std::memory_order_acq_rel);
    util::EpochDomain::global().retire([old] { delete old; });
}

void CacheCore::clear_locked() {
    std::vector<Entry*> victims;
    {
        std::lock_guard lock(write_mutex_);
        victims = table_.load(std::memory_order_relaxed)->entries();
        replace_table(new EntryTable({}));
    }
    for (Entry* victim : victims) victim->retire();
    thread_counters() = {};
    util::EpochDomain::global().collect();
}

std::size_t CacheCore::size() const {
    auto guard = util::EpochDomain::global().pin();
    return table_.load(std::memory_order_acquire)->size();
}

}  // namespace kcache::cache
