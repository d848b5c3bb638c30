// SPDX-License-Identifier: Apache-2.0
// Fuzz target: kcache.conf's text (cache::parse_config_file), which a cache directory supplies:
// every line it keeps is a setting the file may hold with a value its type accepts, and writing
// those settings back (util::updated_config_text, as `kcache -o` does) reads back the same.
#include <cstddef>
#include <cstdint>
#include <string>

#include "cache/settings_table.hpp"
#include "fuzz_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace kcache::util;
    using kcache::cache::check_file_setting;
    using kcache::cache::parse_config_file;
    // A copy sized exactly, so that ASan catches a read one past the text.
    const std::string text(reinterpret_cast<const char*>(data), size);
    const ParsedConfigFile parsed = parse_config_file(text, "/fuzz/kcache.conf");
    std::string rewritten;
    for (const FileSetting& line : parsed.settings) {
        KCACHE_FUZZ_CHECK(line.setting != nullptr);
        KCACHE_FUZZ_CHECK(line.setting->scope == SettingScope::kAnywhere);
        KCACHE_FUZZ_CHECK(check_value(*line.setting, line.value).ok());
        KCACHE_FUZZ_CHECK(check_file_setting(line.setting->key, line.value).ok());
        rewritten = updated_config_text(rewritten, line.setting->key, line.value);
    }
    const ParsedConfigFile again = parse_config_file(rewritten, "/fuzz/kcache.conf");
    KCACHE_FUZZ_CHECK(again.problems.empty());
    // One line per key now, the last value of each as the file gave it.
    for (const FileSetting& line : again.settings) {
        std::string last;
        for (const FileSetting& first : parsed.settings) {
            if (first.setting == line.setting) last = first.value;
        }
        KCACHE_FUZZ_CHECK(line.value == last);
    }
    return 0;
}
