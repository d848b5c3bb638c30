// JSON output of the kcache command: string literals, the one thing printf cannot do safely.
#pragma once

#include <string>

namespace kcache::tool {

// A JSON string literal of `text` (quotes, backslashes and control characters escaped).
std::string json_string(const std::string& text);

}  // namespace kcache::tool
