// `kcache -s` (the statistics of every program that used a cache directory, with its size
// against the budgets) and `kcache -z` (zero them).
#pragma once

#include <cstdint>
#include <string>

namespace kcache::tool {

int show_stats(const std::string& directory, std::uint64_t max_bytes, std::uint64_t max_files,
               bool json);
int zero_stats(const std::string& directory);

}  // namespace kcache::tool
