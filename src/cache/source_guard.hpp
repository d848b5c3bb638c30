// The one guard every call of a caller's source generator goes through.
#pragma once

#include <string_view>

#include "kcache/function_ref.hpp"
#include "kcache/result.hpp"
#include "kcache/source.hpp"

namespace kcache::cache {

// Runs `make`. Its failure, or an exception from it, is kSourceFailed naming `key`: no exception
// crosses the API.
Result<Source> generate_source(std::string_view key, FunctionRef<Result<Source>()> make);

}  // namespace kcache::cache
