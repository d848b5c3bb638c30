// SPDX-License-Identifier: Apache-2.0
// Typed settings described by a table the caller owns, and where each value comes from: command
// line, environment, a `key = value` file in a directory, defaults. The program's own table, file
// name and directory rule live with the program, not here.
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
    kBool,      // 1/0, true/false, yes/no, on/off (as util::env_bool takes)
    kUnsigned,  // a non-negative integer
    kSize,      // bytes, with ccache's units (util::parse_size)
    kString,    // any text
    kPath,      // a file or directory; not empty
    kLog,       // a log setting (util::is_log_setting): off, warn, info, debug, or a path
};

// Where a setting may be given. Most may be anywhere; two kinds may not be in the file.
enum class SettingScope : std::uint8_t {
    kAnywhere,
    // The environment or the command line only: the directory itself (the file lives in it), and
    // whatever relaxes a check of that directory or names a program to run, which a file inside
    // the directory must never decide.
    kNotInFile,
    // Read once per process by the code that uses it, before any configuration is read, so only
    // the environment can set it.
    kEnvironmentOnly,
};

struct Setting {
    std::string_view key;          // as written in the file and on the command line
    std::string_view environment;  // its environment variable
    SettingType type;
    SettingScope scope;
    // The default as a value of the type, shown by -p; empty where the default is worked out at
    // run time (the directory) or means "let the layer below choose" (a path searched for).
    std::string_view default_value;
    std::string_view default_text;  // the README's default column (markdown)
    std::string_view description;   // the README's meaning column (markdown, one line)
    // For kNotInFile: why the file may not set it, for the error that says so.
    std::string_view not_in_file_because = {};
    // The value a bad one falls back to where the setting guards something (verification on, a
    // read-only cache kept read-only); empty: the value of the next source down, or the default.
    std::string_view safe_value = {};
    // For a kString setting with rules of its own: an error saying what is wrong with a value
    // (its message must not repeat a secret the value holds). Null: any text.
    Result<void> (*check)(std::string_view value) = nullptr;
    // How a value may be shown (`-p`, messages): with any secret it holds masked. Null: as it is.
    std::string (*printable)(std::string_view value) = nullptr;
};

// A program's settings: its table, and the names its messages give the file and the directory.
struct SettingsSchema {
    std::span<const Setting> settings;  // in the order they are listed
    std::string_view file_name;         // the settings file, inside the directory below
    std::string_view directory_key;     // the kPath setting naming the directory the file is in
    std::string_view directory_flag;    // the command-line flag that sets it, named in errors
    std::string_view in_code;           // how code sets a kNotInFile setting, named in errors
};

// Null for an unknown key.
const Setting* find_setting(const SettingsSchema& schema, std::string_view key);

enum class SettingOrigin : std::uint8_t { kDefault, kConfigFile, kEnvironment, kCommandLine };

// "default", the path of the file, "environment (VARIABLE)" or "command line".
std::string origin_name(SettingOrigin origin, const Setting& setting, std::string_view config_file);

// The typed parsers every value goes through, wherever it came from. Errors quote the text.
Result<bool> parse_bool(std::string_view text);
Result<std::uint64_t> parse_unsigned(std::string_view text);
// kInvalidArgument saying what the type expects; the caller adds where the value came from.
Result<void> check_value(const Setting& setting, std::string_view text);

// The settings file as read: each good `key = value` line, and a problem (naming "<file>:<line>")
// for each bad one, which is skipped. Pure, for any bytes: the file is untrusted input.
struct FileSetting {
    const Setting* setting = nullptr;
    std::string value;  // trimmed, checked against the type
    std::size_t line = 0;
};
struct ParsedConfigFile {
    std::vector<FileSetting> settings;
    std::vector<std::string> problems;
};
ParsedConfigFile parse_config_file(const SettingsSchema& schema, std::string_view text,
                                   std::string_view path);

// The settings file as the caller found it: its text, or why it could not be read.
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

    // The value as it may be printed (Setting::printable).
    std::string printable_value() const {
        return setting != nullptr && setting->printable != nullptr ? setting->printable(value)
                                                                   : value;
    }
};

class Config {
public:
    // kInvalidArgument naming the key when there is no such setting.
    Result<ConfigEntry> get(std::string_view key) const;
    // Typed reads: a kBool setting; a kUnsigned one, or a kSize one in bytes.
    Result<bool> get_bool(std::string_view key) const;
    Result<std::uint64_t> get_uint(std::string_view key) const;

    // One entry per setting, in the schema's order.
    const std::vector<ConfigEntry>& entries() const noexcept { return entries_; }
    // The directory (the schema's directory_key); empty when none could be worked out.
    const std::string& directory() const noexcept { return entries_[dir_index_].value; }
    // Where the settings file is (or would be); empty without a directory.
    const std::string& config_file() const noexcept { return config_file_; }
    // What could not be used, one line each (a bad environment value, a bad line of the file, a
    // file that could not be read), every other setting kept.
    const std::vector<std::string>& problems() const noexcept { return problems_; }

private:
    friend Result<Config> load_config(const SettingsSchema& schema, std::string_view directory,
                                      Result<ConfigEntry> resolved_directory,
                                      const std::map<std::string, std::string>& overrides,
                                      const ConfigFile* file);
    SettingsSchema schema_;
    std::vector<ConfigEntry> entries_;
    std::size_t dir_index_ = 0;
    std::string config_file_;
    std::vector<std::string> problems_;
};

// An entry for `setting` with its origin_name() filled in.
ConfigEntry config_entry(const Setting& setting, std::string value, SettingOrigin origin,
                         std::string_view config_file);

// The settings from `file` (the settings file's text as the caller read it from the accepted
// directory: `key = value` lines, `#` comments, blank lines; a key given twice: the later line
// wins), then the environment, then `command_line_overrides` (keys as in the file), each later one
// winning, every value checked with its type's parser. A bad line or variable is a problem (see
// Config::problems) naming where it is ("<file>:<line>: <key>: <why>"), and the setting keeps the
// value below it (or its safe value); a bad override (the caller's own command line) is the error.
// `resolved_directory` is the directory the program's own rule finds (the schema's directory_key
// in the overrides first): kInvalidArgument (a bad override) is returned as the error, any other
// error leaves the directory empty. `directory` empty: the resolved one; otherwise `directory`,
// reported with the resolved one's origin when they agree and as "command line" when not (the
// caller chose it). `file` null: no settings file.
Result<Config> load_config(const SettingsSchema& schema, std::string_view directory,
                           Result<ConfigEntry> resolved_directory,
                           const std::map<std::string, std::string>& command_line_overrides,
                           const ConfigFile* file = nullptr);

// The settings file's text with `key = value` set: the key's line replaced (later duplicates
// dropped) or appended, every other line kept as it was.
std::string updated_config_text(std::string_view old_text, std::string_view key,
                                std::string_view value);
// Whether `key = value` may be written to the settings file: kInvalidArgument for an unknown key,
// a setting that cannot be in the file, or a bad value.
Result<void> check_file_setting(const SettingsSchema& schema, std::string_view key,
                                std::string_view value);

// A markdown table of `settings` (header, separator, one row per setting, a newline after each),
// so that documentation made from it cannot drift from the code.
std::string settings_markdown_table(std::span<const Setting> settings);

}  // namespace kcache::util
