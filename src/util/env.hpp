// SPDX-License-Identifier: Apache-2.0
// Reading one variable of the environment.
#pragma once

#include <optional>
#include <string>

namespace kcache::util {

std::optional<std::string> env_string(const char* name);

}  // namespace kcache::util
