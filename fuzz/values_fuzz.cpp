// SPDX-License-Identifier: Apache-2.0
// Fuzz target: the value parsers every setting goes through, wherever it came from
// (util::parse_size, parse_bool, parse_unsigned, and check_value for every setting), and the
// fingerprint a key index record names (store::parse_fingerprint).
#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "cache/settings_table.hpp"
#include "fuzz_check.hpp"
#include "store/key_index.hpp"
#include "util/config.hpp"
#include "util/log.hpp"
#include "util/size.hpp"

namespace {

using namespace kcache::util;
using kcache::cache::find_setting;
using kcache::cache::settings;

bool accepted_by_type(const Setting& setting, std::string_view text) {
    switch (setting.type) {
        case SettingType::kBool:
            return parse_bool(text).ok();
        case SettingType::kUnsigned:
            return parse_unsigned(text).ok();
        case SettingType::kSize:
            return parse_size(text).ok();
        case SettingType::kPath:
            return !text.empty();
        case SettingType::kString:  // any text, unless the setting has rules of its own
            return setting.check == nullptr || setting.check(text).ok();
        case SettingType::kLog:
            return kcache::util::is_log_setting(text);
    }
    return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    // A copy sized exactly, so that ASan catches a read one past the text.
    const std::string text(reinterpret_cast<const char*>(data), size);

    if (auto bytes = parse_size(text)) {
        KCACHE_FUZZ_CHECK(!format_size(*bytes).empty());
    } else {
        KCACHE_FUZZ_CHECK(bytes.error().code() == kcache::Errc::kInvalidArgument);
    }
    if (auto value = parse_unsigned(text)) {
        auto again = parse_unsigned(std::to_string(*value));
        KCACHE_FUZZ_CHECK(again.ok() && *again == *value);
    }
    if (auto value = parse_bool(text)) {
        std::string lower(text);
        std::transform(lower.begin(), lower.end(), lower.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        KCACHE_FUZZ_CHECK(lower == (*value ? "1" : "0") || lower == (*value ? "true" : "false") ||
                          lower == (*value ? "yes" : "no") || lower == (*value ? "on" : "off"));
    }
    // check_value is its type's parser, and refuses a line break whatever the type.
    const bool has_break = text.find_first_of("\n\r") != std::string::npos;
    for (const Setting& setting : settings()) {
        auto checked = check_value(setting, text);
        KCACHE_FUZZ_CHECK(checked.ok() == (!has_break && accepted_by_type(setting, text)));
        if (!checked) KCACHE_FUZZ_CHECK(checked.error().code() == kcache::Errc::kInvalidArgument);
    }
    // Exactly Fingerprint::hex()'s 32 lowercase digits, so that one fingerprint has one name.
    if (const auto fingerprint = kcache::store::parse_fingerprint(text)) {
        KCACHE_FUZZ_CHECK(fingerprint->hex() == text);
    }
    KCACHE_FUZZ_CHECK((find_setting(text) != nullptr) ==
                      std::any_of(settings().begin(), settings().end(),
                                  [&](const Setting& setting) { return setting.key == text; }));
    return 0;
}
