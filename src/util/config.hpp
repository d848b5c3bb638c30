// SPDX-License-Identifier: Apache-2.0
// kcache's settings in one table, and where each value comes from: command line, KCACHE_*
// environment, `kcache.conf` in the cache directory, defaults (the `-p`, `-k`, `-o` of the CLI).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kcache/result.hpp"

namespace kcache::util {

enum class SettingType : std::uint8_t {
    kBool,      // 1/0, true/false, yes/no, on/off (as KCACHE_* booleans always took)
    kUnsigned,  // a non-negative integer
    kSize,      // bytes, with ccache's units (util::parse_size)
    kString,    // any text
    kPath,      // a file or directory; not empty
    kLog,       // a log setting (util::is_log_setting): off, warn, info, debug, or a path
};

// Where a setting may be given. Most may be anywhere; two kinds may not be in kcache.conf.
enum class SettingScope : std::uint8_t {
    kAnywhere,
    // The environment or the command line only: the cache directory itself (kcache.conf lives in
    // it), and whatever relaxes a check of that directory or names a program to run, which a file
    // inside the directory must never decide.
    kNotInFile,
    // Read once per process by the layer that uses it (the compiler libraries are found by
    // src/driver before any configuration is read), so only the environment can set it.
    kEnvironmentOnly,
};

struct Setting {
    std::string_view key;          // as written in kcache.conf and given to -k / -o
    std::string_view environment;  // its KCACHE_* variable
    SettingType type;
    SettingScope scope;
    // The default as a value of the type, shown by -p; empty where the default is worked out at
    // run time (the directory) or means "let the layer below choose" (a path searched for).
    std::string_view default_value;
    std::string_view default_text;  // the README's default column (markdown)
    std::string_view description;   // the README's meaning column (markdown, one line)
    // For kNotInFile: why kcache.conf may not set it, for the error that says so.
    std::string_view not_in_file_because = {};
    // The value a bad one falls back to where the setting guards something (verification on, a
    // read-only cache kept read-only); empty: the value of the next source down, or the default.
    std::string_view safe_value = {};
};

// Every setting, in the order -p and the README list them.
std::span<const Setting> settings();
// Null for an unknown key.
const Setting* find_setting(std::string_view key);

enum class SettingOrigin : std::uint8_t { kDefault, kConfigFile, kEnvironment, kCommandLine };

// "default", the path of kcache.conf, "environment (KCACHE_X)" or "command line".
std::string origin_name(SettingOrigin origin, const Setting& setting, std::string_view config_file);

// The typed parsers every value goes through, wherever it came from. Errors quote the text.
Result<bool> parse_bool(std::string_view text);
Result<std::uint64_t> parse_unsigned(std::string_view text);
// kInvalidArgument saying what the type expects; the caller adds where the value came from.
Result<void> check_value(const Setting& setting, std::string_view text);

// kcache.conf as read: each good `key = value` line, and a problem (naming "<file>:<line>") for
// each bad one, which is skipped. Pure, for any bytes: the file is untrusted input.
struct FileSetting {
    const Setting* setting = nullptr;
    std::string value;  // trimmed, checked against the type
    std::size_t line = 0;
};
struct ParsedConfigFile {
    std::vector<FileSetting> settings;
    std::vector<std::string> problems;
};
ParsedConfigFile parse_config_file(std::string_view text, std::string_view path);

// kcache.conf as the caller found it: its text, or why it could not be read.
struct ConfigFile {
    std::string path;
    std::optional<std::string> text;   // nullopt: no file (or unreadable, see `error`)
    std::optional<std::string> error;  // why it was not read, reported as a problem
};

struct ConfigEntry {
    const Setting* setting = nullptr;
    std::string value;  // the text as given (trimmed), already checked against the type
    SettingOrigin origin = SettingOrigin::kDefault;
    std::string origin_name;  // origin_name() of the above, for printing
};

class Config {
public:
    // kInvalidArgument naming the key when there is no such setting.
    Result<ConfigEntry> get(std::string_view key) const;
    // Typed reads: a kBool setting; a kUnsigned one, or a kSize one in bytes.
    Result<bool> get_bool(std::string_view key) const;
    Result<std::uint64_t> get_uint(std::string_view key) const;

    // One entry per setting, in settings() order.
    const std::vector<ConfigEntry>& entries() const noexcept { return entries_; }
    // The cache directory (the "dir" setting); empty when none could be worked out.
    const std::string& directory() const noexcept { return entries_[dir_index_].value; }
    // Where kcache.conf is (or would be); empty without a directory.
    const std::string& config_file() const noexcept { return config_file_; }
    // What could not be used, one line each (a bad KCACHE_* value, a bad line of kcache.conf, a
    // kcache.conf that could not be read), every other setting kept.
    const std::vector<std::string>& problems() const noexcept { return problems_; }

private:
    friend Result<Config> load_config(std::string_view directory,
                                      const std::map<std::string, std::string>& overrides,
                                      const ConfigFile* file);
    std::vector<ConfigEntry> entries_;
    std::size_t dir_index_ = 0;
    std::string config_file_;
    std::vector<std::string> problems_;
};

inline constexpr std::string_view kConfigFileName = "kcache.conf";

// The cache directory and its origin: "dir" in `command_line_overrides` (-d), else KCACHE_DIR,
// else $XDG_CACHE_HOME/kcache, else $HOME/.cache/kcache (the rule of store::default_directory,
// repeated here because util sits below store). kIoError when none of them is set.
Result<ConfigEntry> config_directory(
    const std::map<std::string, std::string>& command_line_overrides);

// The settings from `file` (kcache.conf's text as the caller read it from the accepted cache
// directory: `key = value` lines, `#` comments, blank lines; a key given twice: the later line
// wins), then the KCACHE_* environment, then `command_line_overrides` (keys as in the file), each
// later one winning, every value checked with its type's parser. A bad line or variable is a
// problem (see Config::problems) naming where it is ("<file>:<line>: <key>: <why>"), and the
// setting keeps the value below it (or its safe value); a bad override (the caller's own command
// line) is the error. `directory` empty: config_directory(command_line_overrides), and when even
// that finds none, "dir" stays empty (the cache then works from memory). A directory given here
// is reported with the origin that rule would give it, and as "command line" when the rule would
// have chosen another one (the caller chose it). `file` null: no kcache.conf.
Result<Config> load_config(std::string_view directory,
                           const std::map<std::string, std::string>& command_line_overrides,
                           const ConfigFile* file = nullptr);

// kcache.conf's text with `key = value` set: the key's line replaced (later duplicates dropped)
// or appended, every other line kept as it was.
std::string updated_config_text(std::string_view old_text, std::string_view key,
                                std::string_view value);
// Whether `key = value` may be written to kcache.conf: kInvalidArgument for an unknown key, a
// setting that cannot be in the file, or a bad value.
Result<void> check_file_setting(std::string_view key, std::string_view value);

// The README's settings table (header, separator, one row per setting, a newline after each),
// made from settings() so that the documentation cannot drift from the code.
std::string settings_markdown_table();

}  // namespace kcache::util
