// SPDX-License-Identifier: Apache-2.0
// Equality of two short byte strings without a call into the C library: cache keys and kernel
// names are mostly a few dozen bytes, compared on every cache hit.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace kcache::util {

namespace detail {
inline std::uint64_t load8(const char* p) noexcept {
    std::uint64_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
inline std::uint32_t load4(const char* p) noexcept {
    std::uint32_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
}  // namespace detail

inline bool same_bytes(std::string_view a, std::string_view b) noexcept {
    const std::size_t n = a.size();
    if (n != b.size()) return false;
    const char* x = a.data();
    const char* y = b.data();
    if (n >= 8) {
        // Eight bytes at a time, the last block overlapping the one before it.
        for (std::size_t i = 0; i + 8 < n; i += 8) {
            if (detail::load8(x + i) != detail::load8(y + i)) return false;
        }
        return detail::load8(x + n - 8) == detail::load8(y + n - 8);
    }
    if (n >= 4) {
        return detail::load4(x) == detail::load4(y) &&
               detail::load4(x + n - 4) == detail::load4(y + n - 4);
    }
    for (std::size_t i = 0; i < n; ++i) {
        if (x[i] != y[i]) return false;
    }
    return true;
}

}  // namespace kcache::util
