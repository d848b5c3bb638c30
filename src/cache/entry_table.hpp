// The cache's map, as an immutable open-addressing snapshot: readers probe it with no lock while
// writers build a new snapshot and publish it (copy-on-write). Misses are rare and cost a
// compile, so an O(n) copy per insert is noise next to them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "cache/entry.hpp"

namespace kcache::cache {

class EntryTable {
public:
    explicit EntryTable(const std::vector<Entry*>& entries);

    Entry* find(std::string_view key, int arch, std::uint64_t hash) const noexcept {
        for (std::size_t i = hash & mask_;; i = (i + 1) & mask_) {
            Entry* entry = slots_[i];
            if (entry == nullptr) return nullptr;
            if (entry->hash == hash && entry->arch == arch && entry->key == key) return entry;
        }
    }

    const std::vector<Entry*>& entries() const noexcept { return entries_; }
    std::size_t size() const noexcept { return entries_.size(); }

private:
    std::vector<Entry*> entries_;
    std::size_t mask_ = 0;
    std::unique_ptr<Entry*[]> slots_;  // at most half full, so every probe ends at a null
};

}  // namespace kcache::cache
