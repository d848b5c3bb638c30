// SPDX-License-Identifier: Apache-2.0
// Fuzz target: a key-index record (store::parse_key_record), which a cache directory supplies:
// whatever it accepts is written back to exactly the same text.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_check.hpp"
#include "store/key_index.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    const auto record = kcache::store::parse_key_record(text);
    if (!record) return 0;
    KCACHE_FUZZ_CHECK(kcache::store::format_key_record(record->fingerprint, record->caller_key) ==
                      text);
    return 0;
}
