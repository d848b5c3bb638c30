#include "util/env.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>

namespace kcache::util {

std::optional<std::string> env_string(const char* name) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') return std::nullopt;
    return std::string(value);
}

Result<std::optional<bool>> env_bool(const char* name) {
    auto text = env_string(name);
    if (!text) return std::optional<bool>();
    std::string lower = *text;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (lower == "1" || lower == "true" || lower == "yes" || lower == "on") {
        return std::optional<bool>(true);
    }
    if (lower == "0" || lower == "false" || lower == "no" || lower == "off") {
        return std::optional<bool>(false);
    }
    return Error(Errc::kInvalidArgument,
                 std::string(name) + "=" + *text + ": expected 1/0, true/false, yes/no or on/off");
}

Result<std::optional<std::uint64_t>> env_uint(const char* name) {
    auto text = env_string(name);
    if (!text) return std::optional<std::uint64_t>();
    std::uint64_t value = 0;
    const char* end = text->data() + text->size();
    auto [ptr, ec] = std::from_chars(text->data(), end, value);
    if (ec != std::errc() || ptr != end) {
        return Error(Errc::kInvalidArgument,
                     std::string(name) + "=" + *text + ": expected a non-negative integer");
    }
    return std::optional<std::uint64_t>(value);
}

}  // namespace kcache::util
