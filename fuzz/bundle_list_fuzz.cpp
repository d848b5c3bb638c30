// SPDX-License-Identifier: Apache-2.0
// Fuzz target: a warm-up record's list of bundles (build::parse_bundle_list), which a tier
// supplies: whatever it accepts is written back to exactly the same text.
#include <cstddef>
#include <cstdint>
#include <string>

#include "build/warm_up_record.hpp"
#include "fuzz_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    const auto bundles = kcache::build::parse_bundle_list(text);
    if (!bundles) return 0;
    KCACHE_FUZZ_CHECK(bundles->size() <= kcache::build::kMaxRecordedBundles);
    KCACHE_FUZZ_CHECK(kcache::build::format_bundle_list(*bundles) == text);
    return 0;
}
