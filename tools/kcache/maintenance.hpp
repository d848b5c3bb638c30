// SPDX-License-Identifier: Apache-2.0
// The kcache command's work on a cache directory: clear, cleanup (budgets, age), ls, inspect,
// verify. Each returns the process exit status and prints what it did.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "store/cache_directory.hpp"

namespace kcache::tool {

struct Budgets {
    std::uint64_t max_bytes = 0;  // 0: none
    std::uint64_t max_files = 0;  // 0: none
};

int clear_cache(const store::CacheDirectory& directory, bool dry_run);
int cleanup_cache(const store::CacheDirectory& directory, const Budgets& budgets,
                  std::optional<std::chrono::seconds> older_than, bool dry_run);
// `width`: the columns to fit the table into (0: no limit).
int list_cache(const store::CacheDirectory& directory, bool json, std::size_t width);
int inspect_entry(const store::CacheDirectory& directory, const std::string& fingerprint,
                  bool json);
int verify_cache(const store::CacheDirectory& directory, bool repair, bool json);

// The longest age --evict-older-than takes: 100 years, far inside what a time point can hold.
inline constexpr std::chrono::seconds kMaxAge{std::int64_t{100} * 365 * 86400};

// "30d", "12h", "90m", "3600s", "7" (days, as ccache), up to kMaxAge: a message on error.
std::optional<std::chrono::seconds> parse_age(const std::string& text, std::string& error);

}  // namespace kcache::tool
