// SPDX-License-Identifier: Apache-2.0
// Bytes as lowercase hex, two digits a byte.
#pragma once

#include <string>
#include <string_view>

namespace kcache::util {

std::string to_hex(std::string_view bytes);

}  // namespace kcache::util
