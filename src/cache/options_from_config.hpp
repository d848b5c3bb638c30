// SPDX-License-Identifier: Apache-2.0
// CacheOptions from the resolved configuration (util/config.hpp): the one place that knows both,
// kept in src/cache because CacheOptions is the cache layer's type and util sits below it.
#pragma once

#include "kcache/kernel_cache.hpp"
#include "util/config.hpp"

namespace kcache::cache {

// Every setting CacheOptions has a field for; the rest (driver, host_compile, memory_bytes) keep
// their defaults. `log` and the compiler libraries are not CacheOptions: util/log and src/driver
// read them from the environment. With `disk` on but no directory, the cache works from memory
// (logged), as CacheOptions::from_env() does.
Result<CacheOptions> to_cache_options(const util::Config& config);

}  // namespace kcache::cache
