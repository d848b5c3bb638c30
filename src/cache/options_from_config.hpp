// SPDX-License-Identifier: Apache-2.0
// CacheOptions from the resolved configuration (cache/settings_table.hpp): the one place that
// knows both the settings and CacheOptions.
#pragma once

#include "cache/settings_table.hpp"
#include "kcache/kernel_cache.hpp"

namespace kcache::cache {

// Every setting CacheOptions has a field for; the rest (driver, host_compile, memory_bytes) keep
// their defaults. `log` and the compiler libraries are not CacheOptions: util/log and src/driver
// read them from the environment. With `disk` on but no directory, the cache works from memory
// (logged), as CacheOptions::from_env() does.
Result<CacheOptions> to_cache_options(const util::Config& config);

}  // namespace kcache::cache
