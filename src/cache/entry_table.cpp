#include "cache/entry_table.hpp"

#include <bit>

namespace kcache::cache {

EntryTable::EntryTable(const std::vector<Entry*>& entries) : entries_(entries) {
    const std::size_t capacity = std::bit_ceil(std::max<std::size_t>(16, entries.size() * 2));
    mask_ = capacity - 1;
    slots_ = std::make_unique<Entry*[]>(capacity);  // value-initialised: all null
    for (Entry* entry : entries_) {
        std::size_t i = entry->hash & mask_;
        while (slots_[i] != nullptr) i = (i + 1) & mask_;
        slots_[i] = entry;
    }
}

}  // namespace kcache::cache
