// Reading KCACHE_* settings from the environment, with clear errors for bad values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kcache/result.hpp"

namespace kcache::util {

std::optional<std::string> env_string(const char* name);
// "1", "true", "yes", "on" / "0", "false", "no", "off"; anything else is an error.
Result<std::optional<bool>> env_bool(const char* name);
Result<std::optional<std::uint64_t>> env_uint(const char* name);

}  // namespace kcache::util
