// SPDX-License-Identifier: Apache-2.0
// The one guard every call of a caller's source generator goes through.
#pragma once

#include "kcache/function_ref.hpp"
#include "kcache/result.hpp"
#include "kcache/source.hpp"

namespace kcache::cache {

// Runs `make`. Its failure, or an exception from it, is kSourceFailed: no exception
// crosses the API.
Result<Source> generate_source(FunctionRef<Result<Source>()> make);

}  // namespace kcache::cache
