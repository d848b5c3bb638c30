// SPDX-License-Identifier: Apache-2.0
// Reading the environment; the typed KCACHE_* settings are parsed by util/config.
#pragma once

#include <optional>
#include <string>

namespace kcache::util {

std::optional<std::string> env_string(const char* name);

}  // namespace kcache::util
