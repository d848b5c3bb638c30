// kcache's settings in one table, and where each value comes from: command line, KCACHE_*
// environment, `kcache.conf` in the cache directory, defaults (the `-p`, `-k`, `-o` of the CLI).
#pragma once

#include <cstdint>
#include <map>
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
};

// Where a setting may be given. Most may be anywhere; two kinds may not be in kcache.conf.
enum class SettingScope : std::uint8_t {
    kAnywhere,
    // The cache directory: kcache.conf lives in it, so it cannot say where it is.
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
};

// Every setting, in the order -p and the README list them.
std::span<const Setting> settings();
// Null for an unknown key.
const Setting* find_setting(std::string_view key);

enum class Origin : std::uint8_t { kDefault, kConfigFile, kEnvironment, kCommandLine };

// "default", the path of kcache.conf, "environment (KCACHE_X)" or "command line".
std::string origin_name(Origin origin, const Setting& setting, std::string_view config_file);

// The typed parsers every value goes through, wherever it came from. Errors quote the text.
Result<bool> parse_bool(std::string_view text);
Result<std::uint64_t> parse_unsigned(std::string_view text);
// kInvalidArgument saying what the type expects; the caller adds where the value came from.
Result<void> check_value(const Setting& setting, std::string_view text);

struct ConfigEntry {
    const Setting* setting = nullptr;
    std::string value;  // the text as given (trimmed), already checked against the type
    Origin origin = Origin::kDefault;
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

private:
    friend Result<Config> load_config(std::string_view directory,
                                      const std::map<std::string, std::string>& overrides);
    std::vector<ConfigEntry> entries_;
    std::size_t dir_index_ = 0;
    std::string config_file_;
};

inline constexpr std::string_view kConfigFileName = "kcache.conf";

// The cache directory and its origin: "dir" in `command_line_overrides` (-d), else KCACHE_DIR,
// else $XDG_CACHE_HOME/kcache, else $HOME/.cache/kcache (the rule of store::default_directory,
// repeated here because util sits below store). kIoError when none of them is set.
Result<ConfigEntry> config_directory(
    const std::map<std::string, std::string>& command_line_overrides);

// Reads `<directory>/kcache.conf` (`key = value` lines, `#` comments, blank lines; a missing file
// is no error; a key given twice: the later line wins), then the KCACHE_* environment, then
// `command_line_overrides` (keys as in the file), each later one winning, and checks every value
// with its type's parser. Any bad line, variable or override is an error naming where it is:
// "<file>:<line>: <key>: <why>". `directory` empty: config_directory(command_line_overrides), and
// when even that finds none, no file is read and "dir" stays empty (the cache then works from
// memory). A directory given here is reported with the origin that rule would give it, and as
// "command line" when the rule would have chosen another one (the caller chose it).
Result<Config> load_config(std::string_view directory,
                           const std::map<std::string, std::string>& command_line_overrides);

// Sets `key = value` in `<directory>/kcache.conf` (creating the directory, mode 0700, and the
// file if needed): the key's line is replaced (later duplicates dropped) or appended, every other
// line kept as it was. The new file replaces the old atomically, and writers are serialised by a
// flock on `<directory>/kcache.conf.lock`, so concurrent sets of different keys all land. An
// unknown key, a setting that cannot be in the file, or a bad value is an error and nothing is
// touched.
Result<void> set_config_value(std::string_view directory, std::string_view key,
                              std::string_view value);

// The README's settings table (header, separator, one row per setting, a newline after each),
// made from settings() so that the documentation cannot drift from the code.
std::string settings_markdown_table();

}  // namespace kcache::util
