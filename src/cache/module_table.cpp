// SPDX-License-Identifier: Apache-2.0
#include "cache/module_table.hpp"

#include <bit>

namespace kcache::cache {

ModuleTable::ModuleTable(const std::vector<LoadedModule*>& entries) : entries_(entries) {
    const std::size_t capacity = std::bit_ceil(std::max<std::size_t>(16, entries.size() * 4));
    mask_ = capacity - 1;
    slots_ = std::make_unique<std::atomic<LoadedModule*>[]>(capacity);
    for (std::size_t i = 0; i < capacity; ++i) slots_[i].store(nullptr, std::memory_order_relaxed);
    for (LoadedModule* entry : entries_) {
        std::size_t i = entry->hash & mask_;
        while (slots_[i].load(std::memory_order_relaxed) != nullptr) i = (i + 1) & mask_;
        slots_[i].store(entry, std::memory_order_relaxed);
    }
    size_.store(entries_.size(), std::memory_order_relaxed);
    // The table reaches readers through the cache's release store of its pointer.
}

bool ModuleTable::try_insert(LoadedModule* entry) noexcept {
    if ((entries_.size() + 1) * 2 > mask_ + 1) return false;
    try {
        entries_.push_back(entry);
    } catch (...) {  // out of memory: the caller builds a new table, which reports it
        return false;
    }
    std::size_t i = entry->hash & mask_;
    while (slots_[i].load(std::memory_order_relaxed) != nullptr) i = (i + 1) & mask_;
    slots_[i].store(entry, std::memory_order_release);
    size_.store(entries_.size(), std::memory_order_relaxed);
    return true;
}

}  // namespace kcache::cache
