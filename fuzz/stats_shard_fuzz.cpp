// SPDX-License-Identifier: Apache-2.0
// Fuzz target: a statistics shard's text (store::parse_stats_shard), which a cache directory
// supplies: whatever it accepts is written back to the same text and read back the same.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_check.hpp"
#include "store/persistent_stats.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    const auto shard = kcache::store::parse_stats_shard(text);
    if (!shard) return 0;
    const std::string again = kcache::store::format_stats_shard(*shard);
    const auto reread = kcache::store::parse_stats_shard(again);
    KCACHE_FUZZ_CHECK(reread.has_value());
    KCACHE_FUZZ_CHECK(reread->counters == shard->counters);
    KCACHE_FUZZ_CHECK(reread->unknown == shard->unknown);
    KCACHE_FUZZ_CHECK(kcache::store::format_stats_shard(*reread) == again);
    return 0;
}
