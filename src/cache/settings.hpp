// SPDX-License-Identifier: Apache-2.0
// kcache's settings as a program sees them: the cache directory accepted first, then its
// kcache.conf read through it, the environment and the command line over that (settings_table), and
// kcache.conf written back the same careful way (`kcache -o`).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "cache/settings_table.hpp"
#include "kcache/result.hpp"
#include "store/cache_directory.hpp"

namespace kcache::cache {

// How the configured directory must be checked: allow_shared_dir and read_only, which only the
// environment and the command line can set.
store::DirectoryPolicy directory_policy(const util::Config& config);

// Every setting with its origin. kcache.conf is read only from a directory accepted by the policy
// the environment and the command line give (a refused one is said by what uses it), and only if
// it is a regular file of a plausible size; otherwise it is not read, and that is one of
// Config::problems() (as is every bad value, each skipped). Applies the resulting `log`
// setting. kInvalidArgument only for a bad command line.
Result<util::Config> load_settings(const std::map<std::string, std::string>& command_line);

// Applies KCACHE_LOG unless a log setting was applied already (by load_settings): a cache built
// from explicit CacheOptions, and a compile worker, log as the environment asks.
void apply_environment_log_setting();

// Sets `key = value` in the directory's kcache.conf (making the directory, mode 0700, if needed),
// through the directory accepted by `policy`: the key's line replaced, every other line kept. The
// new file replaces the old atomically, and writers are serialised by a lock on
// `kcache.conf.lock`, so concurrent sets of different keys all land. An unknown key, a setting
// that cannot be in the file, or a bad value is kInvalidArgument, and nothing is touched.
Result<void> set_config_value(const std::string& directory, const store::DirectoryPolicy& policy,
                              std::string_view key, std::string_view value);

}  // namespace kcache::cache
