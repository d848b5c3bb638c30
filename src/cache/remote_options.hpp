// SPDX-License-Identifier: Apache-2.0
// The remote tier's options from a cache's: the `remote` setting parsed, the password from
// KCACHE_REMOTE_PASSWORD, the lease times.
#pragma once

#include "kcache/kernel_cache.hpp"
#include "kcache/result.hpp"
#include "store/remote/remote_tier.hpp"

namespace kcache::cache {

// No backends when `remote` is empty; kInvalidArgument naming what is wrong (never a password)
// when it does not parse.
Result<store::remote::RemoteOptions> remote_options(const CacheOptions& options);

}  // namespace kcache::cache
