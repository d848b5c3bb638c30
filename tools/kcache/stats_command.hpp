// SPDX-License-Identifier: Apache-2.0
// `kcache -s` (the statistics of every program that used a cache directory, with its size
// against the budgets) and `kcache -z` (zero them).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "store/cache_directory.hpp"

namespace kcache::tool {

int show_stats(const std::shared_ptr<const store::CacheDirectory>& directory,
               std::uint64_t max_bytes, std::uint64_t max_files, bool json);
int zero_stats(const std::shared_ptr<const store::CacheDirectory>& directory);

}  // namespace kcache::tool
