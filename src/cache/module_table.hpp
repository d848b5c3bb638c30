// SPDX-License-Identifier: Apache-2.0
// The cache's map: open addressing, probed by readers with no lock. Writers (under the cache's
// write lock) add modules in place while the table stays at most half full: a slot only ever
// goes from null to a module, published with release, so a reader sees either. Growing and
// removing build a new table, which the cache publishes (copy-on-write); a rebuild leaves room
// for four times its modules, so n inserts cost O(n) in all. (A copy per insert made a warm start
// of n kernels, each a miss that costs no compile, quadratic.)
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "cache/loaded_module.hpp"
#include "util/same_bytes.hpp"

namespace kcache::cache {

class ModuleTable {
public:
    // Room for twice `modules` before it is half full.
    explicit ModuleTable(const std::vector<LoadedModule*>& entries);

    LoadedModule* find(std::string_view key, int arch, std::uint64_t hash) const noexcept {
        for (std::size_t i = hash & mask_;; i = (i + 1) & mask_) {
            // Acquire: pairs with try_insert's release, so the module's fields are visible.
            LoadedModule* entry = slots_[i].load(std::memory_order_acquire);
            if (entry == nullptr) return nullptr;
            if (entry->hash == hash && entry->arch == arch && util::same_bytes(entry->key, key)) {
                return entry;
            }
        }
    }

    // Writers only, under the cache's write lock. False, changing nothing, if the module would
    // make the table more than half full: then build a bigger one.
    bool try_insert(LoadedModule* entry) noexcept;

    // Writers only, under the cache's write lock.
    const std::vector<LoadedModule*>& entries() const noexcept { return entries_; }
    // Any thread.
    std::size_t size() const noexcept { return size_.load(std::memory_order_relaxed); }

private:
    std::vector<LoadedModule*> entries_;  // guarded by the cache's write lock
    std::atomic<std::size_t> size_{0};
    std::size_t mask_ = 0;
    std::unique_ptr<std::atomic<LoadedModule*>[]>
        slots_;  // at most half full: every probe ends at null
};

}  // namespace kcache::cache
