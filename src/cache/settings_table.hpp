// SPDX-License-Identifier: Apache-2.0
// kcache's settings in one table, and where each value comes from: command line, KCACHE_*
// environment, `kcache.conf` in the cache directory, defaults (the `-p`, `-k`, `-o` of the CLI).
// The machinery (typed values, the file's reader and writer, precedence) is util/config's.
#pragma once

#include <map>
#include <span>
#include <string>
#include <string_view>

#include "kcache/result.hpp"
#include "store/disk_cleaner.hpp"
#include "util/config.hpp"

namespace kcache::cache {

using store::kConfigFileName;

// Every setting, in the order -p and the user guide list them.
std::span<const util::Setting> settings();
// The table with the words kcache's messages use (kcache.conf, -d, CacheOptions).
const util::SettingsSchema& settings_schema();
// Null for an unknown key.
const util::Setting* find_setting(std::string_view key);

// The cache directory and its origin: "dir" in `command_line_overrides` (-d), else KCACHE_DIR,
// else store::default_directory()'s rule ($XDG_CACHE_HOME/kcache, else $HOME/.cache/kcache).
// kIoError when none of them is set.
Result<util::ConfigEntry> config_directory(
    const std::map<std::string, std::string>& command_line_overrides);

// util::load_config over kcache's table, the directory found by config_directory(): `directory`
// empty means that one, and when even that finds none, "dir" stays empty (the cache then works
// from memory). `file` null: no kcache.conf.
Result<util::Config> load_config(std::string_view directory,
                                 const std::map<std::string, std::string>& command_line_overrides,
                                 const util::ConfigFile* file = nullptr);

// kcache.conf's text as read (util::parse_config_file over kcache's table).
util::ParsedConfigFile parse_config_file(std::string_view text, std::string_view path);
// Whether `key = value` may be written to kcache.conf: kInvalidArgument for an unknown key, a
// setting that cannot be in the file, or a bad value.
Result<void> check_file_setting(std::string_view key, std::string_view value);

// The user guide's settings table, made from settings() so that the documentation cannot drift
// from the code.
std::string settings_markdown_table();

}  // namespace kcache::cache
