// SPDX-License-Identifier: Apache-2.0
#include "util/size.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>

namespace kcache::util {

Result<std::uint64_t> parse_size(std::string_view text) {
    auto bad = [&](const char* why) {
        return Error(Errc::kInvalidArgument,
                     "bad size '" + std::string(text) + "': " + why +
                         " (a number with an optional unit: k, M, G, T, Ki, Mi, Gi, Ti)");
    };
    std::size_t end = 0;
    while (end < text.size() &&
           (std::isdigit(static_cast<unsigned char>(text[end])) != 0 || text[end] == '.')) {
        ++end;
    }
    if (end == 0) return bad("no number");
    const std::string number(text.substr(0, end));
    char* parsed_end = nullptr;
    const double value = std::strtod(number.c_str(), &parsed_end);
    if (parsed_end != number.c_str() + number.size() || !std::isfinite(value)) {
        return bad("not a number");
    }
    std::string_view unit = text.substr(end);
    if (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
    if (unit.ends_with("B") && unit.size() > 1) unit.remove_suffix(1);  // "GB", "GiB"
    double scale = 0;
    if (unit.empty() || unit == "G") {
        scale = 1e9;
    } else if (unit == "k" || unit == "K") {
        scale = 1e3;
    } else if (unit == "M") {
        scale = 1e6;
    } else if (unit == "T") {
        scale = 1e12;
    } else if (unit == "Ki") {
        scale = 1024.0;
    } else if (unit == "Mi") {
        scale = 1024.0 * 1024;
    } else if (unit == "Gi") {
        scale = 1024.0 * 1024 * 1024;
    } else if (unit == "Ti") {
        scale = 1024.0 * 1024 * 1024 * 1024;
    } else {
        return bad("unknown unit");
    }
    const double bytes = value * scale;
    if (bytes >= 9.2e18) return bad("too large");  // llround's long long would overflow
    const auto rounded = static_cast<std::uint64_t>(std::llround(bytes));
    // 0 means "no limit": a positive size that rounds to it would lift the budget it sets.
    if (rounded == 0 && value > 0) return bad("less than a byte");
    return rounded;
}

std::string format_size(std::uint64_t bytes) {
    static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
    if (bytes < 1024) return std::to_string(bytes) + " bytes";
    double value = static_cast<double>(bytes) / 1024;
    std::size_t unit = 0;
    while (value >= 1024 && unit + 1 < std::size(kUnits)) {
        value /= 1024;
        ++unit;
    }
    char text[32];
    std::snprintf(text, sizeof text, "%.1f %s", value, kUnits[unit]);
    return text;
}

}  // namespace kcache::util
