// SPDX-License-Identifier: Apache-2.0
// The writers of the published map: publish, evict over budget, discard and clear. Each swaps
// in a new table under the writers' lock and retires the old one through the epoch domain, so
// that readers on the hit path never wait.
#include <algorithm>

#include "cache/loaded_modules.hpp"
#include "cache/thread_counters.hpp"
#include "util/epoch.hpp"
#include "util/log.hpp"

namespace kcache::cache {
namespace {

std::string describe_key(std::string_view key, int arch) {
    return std::string(key) + " (sm_" + std::to_string(arch) + ")";
}

}  // namespace

void LoadedModules::discard(const ModuleHandle& module) {
    LoadedModule* entry = module.entry_;
    {
        std::lock_guard lock(write_mutex_);
        const ModuleTable* table = table_.load(std::memory_order_relaxed);
        std::vector<LoadedModule*> kept;
        kept.reserve(table->size());
        for (LoadedModule* e : table->entries()) {
            if (e != entry) kept.push_back(e);
        }
        if (kept.size() == table->size()) return;  // already gone (evicted, cleared)
        replace_table(new ModuleTable(kept));
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

std::vector<LoadedModule*> LoadedModules::publish(LoadedModule* entry) {
    entry->last_used.store(tick_.fetch_add(1, std::memory_order_relaxed) + 1,
                           std::memory_order_relaxed);
    ModuleTable* table = table_.load(std::memory_order_relaxed);
    if (!table->try_insert(entry)) {  // full enough: a bigger table, with room to grow in place
        std::vector<LoadedModule*> entries = table->entries();
        entries.push_back(entry);
        replace_table(new ModuleTable(entries));
    }
    return evict_over_budget();
}

std::vector<LoadedModule*> LoadedModules::evict_over_budget() {
    const std::size_t budget = std::max<std::size_t>(1, options.max_entries);
    const ModuleTable* table = table_.load(std::memory_order_relaxed);
    if (table->size() <= budget) return {};

    // Least recently used first, and among those, modules no handle holds: evicting a held one
    // frees nothing until its handles go. Other threads take and drop handles and mark recency
    // while we sort, so the sort works on a snapshot: a comparator reading live values would
    // be inconsistent, which std::sort punishes by running off the end of the range.
    struct Candidate {
        LoadedModule* entry;
        bool held;
        std::uint64_t last_used;
    };
    std::vector<Candidate> order;
    order.reserve(table->size());
    for (LoadedModule* entry : table->entries()) {
        order.push_back(
            {entry, entry->referenced(), entry->last_used.load(std::memory_order_relaxed)});
    }
    std::sort(order.begin(), order.end(), [](const Candidate& a, const Candidate& b) {
        if (a.held != b.held) return !a.held;
        return a.last_used < b.last_used;
    });
    // Down to a sixteenth below the budget (exactly to it below 16): the sort and the rebuilt
    // table cost the whole table, which once per insertion past a large budget made loading N
    // kernels cost N times the table.
    const std::size_t excess = order.size() - (budget - budget / 16);
    std::vector<LoadedModule*> victims;
    std::vector<LoadedModule*> kept;
    for (std::size_t i = 0; i < order.size(); ++i) {
        (i < excess ? victims : kept).push_back(order[i].entry);
    }
    replace_table(new ModuleTable(kept));
    evictions_.fetch_add(victims.size(), std::memory_order_relaxed);
    return victims;
}

void LoadedModules::replace_table(ModuleTable* table) {
    const ModuleTable* old = table_.exchange(table, std::memory_order_acq_rel);
    util::EpochDomain::global().retire([old] { delete old; });
}

void LoadedModules::clear_locked() {
    util::EpochDomain::Batch batch(util::EpochDomain::global());  // one collect, at its end
    std::vector<LoadedModule*> victims;
    {
        std::lock_guard lock(write_mutex_);
        victims = table_.load(std::memory_order_relaxed)->entries();
        replace_table(new ModuleTable({}));
    }
    for (LoadedModule* victim : victims) victim->retire();
    thread_counters() = {};
}

std::size_t LoadedModules::size() const {
    auto guard = util::EpochDomain::global().pin();
    return table_.load(std::memory_order_acquire)->size();
}

}  // namespace kcache::cache
