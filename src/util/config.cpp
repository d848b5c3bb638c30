// SPDX-License-Identifier: Apache-2.0
// The settings file's reader and writer, the typed parsers, and the precedence of where values
// come from (command line > environment > the file > defaults), for a table the caller gives.
#include "util/config.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <optional>
#include <utility>

#include "util/env.hpp"
#include "util/log.hpp"
#include "util/size.hpp"
#include "util/try.hpp"

namespace kcache::util {
namespace {

constexpr std::string_view kWhitespace = " \t\r\v\f";

std::string_view trim(std::string_view text) {
    const auto first = text.find_first_not_of(kWhitespace);
    if (first == std::string_view::npos) return {};
    const auto last = text.find_last_not_of(kWhitespace);
    return text.substr(first, last - first + 1);
}

// Untrusted text in a message: control bytes shown as '?', at most 80 bytes.
std::string printable_text(std::string_view text) {
    std::string out(text.substr(0, 80));
    for (char& c : out) {
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
    }
    if (text.size() > 80) out += "...";
    return out;
}

Error invalid(std::string message) {
    return {Errc::kInvalidArgument, std::move(message)};
}

std::string known_keys(const SettingsSchema& schema) {
    std::string keys;
    for (const Setting& setting : schema.settings) {
        if (!keys.empty()) keys += ", ";
        keys += setting.key;
    }
    return keys;
}

Error unknown_key(const SettingsSchema& schema, std::string_view where, std::string_view key) {
    std::string message = where.empty() ? "" : std::string(where) + ": ";
    message += "unknown setting '" + std::string(key) + "' (known: " + known_keys(schema) + ")";
    return invalid(std::move(message));
}

// One line of the settings file. A comment or blank line has no key; a line without '=' is
// malformed.
struct ConfigLine {
    bool is_setting = false;
    bool malformed = false;
    std::string_view key;
    std::string_view value;
};

ConfigLine split_line(std::string_view line) {
    const std::string_view text = trim(line);
    // Comments are whole lines only, as in ccache: a path or a log file name may contain '#'.
    if (text.empty() || text.front() == '#') return {};
    const auto equals = text.find('=');
    if (equals == std::string_view::npos)
        return {.is_setting = false, .malformed = true, .key = {}, .value = {}};
    return {.is_setting = true,
            .malformed = false,
            .key = trim(text.substr(0, equals)),
            .value = trim(text.substr(equals + 1))};
}

std::vector<std::string_view> split_lines(std::string_view text) {
    std::vector<std::string_view> lines;
    while (!text.empty()) {
        const auto end = text.find('\n');
        if (end == std::string_view::npos) {
            lines.push_back(text);
            break;
        }
        lines.push_back(text.substr(0, end));
        text.remove_prefix(end + 1);
    }
    return lines;
}

std::string join_path(std::string_view directory, std::string_view name) {
    std::string path(directory);
    if (!path.empty() && path.back() != '/') path += '/';
    path += name;
    return path;
}

std::size_t index_of(const SettingsSchema& schema, const Setting& setting) {
    return static_cast<std::size_t>(&setting - schema.settings.data());
}

ConfigEntry make_entry(const Setting& setting, std::string value, SettingOrigin origin,
                       std::string_view config_file) {
    return config_entry(setting, std::move(value), origin, config_file);
}

// How the error names the ways to set a setting the file may not hold.
std::string set_instead(const SettingsSchema& schema, const Setting& setting) {
    const bool directory = setting.key == schema.directory_key;
    return (directory ? std::string(schema.directory_flag) + " or " : std::string()) +
           std::string(setting.environment);
}

// What a file inside the cache directory may not say even of a setting it may hold: a log file
// to append to (a level it may set), which would let the directory pick a file of the user's to
// write into.
Result<void> file_may_hold(const SettingsSchema& schema, const Setting& setting,
                           std::string_view value) {
    if (setting.type == SettingType::kLog && value.find('/') != std::string_view::npos) {
        return invalid(std::string(setting.key) + ": a file to log to cannot be named in " +
                       std::string(schema.file_name) +
                       " (the directory would choose a file to write); use " +
                       std::string(setting.environment));
    }
    return ok();
}

// A value from a source that could not be used: the setting keeps what it had (a lower source's,
// or the default), unless it guards something, where it takes its safe value.
void fall_back(const SettingsSchema& schema, const Setting& setting,
               std::vector<ConfigEntry>& entries, SettingOrigin origin,
               std::string_view config_file) {
    if (setting.safe_value.empty()) return;
    const std::size_t index = index_of(schema, setting);
    entries[index] = make_entry(setting, std::string(setting.safe_value), origin, config_file);
    entries[index].origin_name +=
        " (a bad value, taken as " + std::string(setting.safe_value) + ")";
}

}  // namespace

ParsedConfigFile parse_config_file(const SettingsSchema& schema, std::string_view text,
                                   std::string_view path) {
    ParsedConfigFile parsed;
    const std::vector<std::string_view> lines = split_lines(text);
    for (std::size_t number = 1; number <= lines.size(); ++number) {
        const ConfigLine line = split_line(lines[number - 1]);
        const std::string where = std::string(path) + ":" + std::to_string(number);
        if (line.malformed) {
            parsed.problems.push_back(where + ": expected 'key = value', got '" +
                                      printable_text(trim(lines[number - 1])) + "'");
            continue;
        }
        if (!line.is_setting) continue;
        const Setting* setting = find_setting(schema, line.key);
        if (setting == nullptr) {
            parsed.problems.push_back(
                unknown_key(schema, where, printable_text(line.key)).message());
            continue;
        }
        if (setting->scope == SettingScope::kNotInFile) {
            parsed.problems.push_back(where + ": " + std::string(setting->key) +
                                      " cannot be set in " + std::string(schema.file_name) + " (" +
                                      std::string(setting->not_in_file_because) + "); use " +
                                      set_instead(schema, *setting) +
                                      (setting->key == schema.directory_key
                                           ? ""
                                           : " (or " + std::string(schema.in_code) + ")"));
            continue;
        }
        if (setting->scope == SettingScope::kEnvironmentOnly) {
            parsed.problems.push_back(where + ": " + std::string(setting->key) +
                                      " can only be set in the environment (" +
                                      std::string(setting->environment) + ")");
            continue;
        }
        if (auto checked = check_value(*setting, line.value); !checked) {
            parsed.problems.push_back(where + ": " + std::string(setting->key) + ": " +
                                      checked.error().message());
            continue;
        }
        if (auto allowed = file_may_hold(schema, *setting, line.value); !allowed) {
            parsed.problems.push_back(where + ": " + allowed.error().message());
            continue;
        }
        parsed.settings.push_back(FileSetting{setting, std::string(line.value), number});
    }
    return parsed;
}

const Setting* find_setting(const SettingsSchema& schema, std::string_view key) {
    const auto found = std::find_if(schema.settings.begin(), schema.settings.end(),
                                    [&](const Setting& setting) { return setting.key == key; });
    return found == schema.settings.end() ? nullptr : &*found;
}

ConfigEntry config_entry(const Setting& setting, std::string value, SettingOrigin origin,
                         std::string_view config_file) {
    ConfigEntry entry;
    entry.setting = &setting;
    entry.value = std::move(value);
    entry.origin = origin;
    entry.origin_name = origin_name(origin, setting, config_file);
    return entry;
}

std::string origin_name(SettingOrigin origin, const Setting& setting,
                        std::string_view config_file) {
    switch (origin) {
        case SettingOrigin::kDefault:
            return "default";
        case SettingOrigin::kConfigFile:
            return std::string(config_file);
        case SettingOrigin::kEnvironment:
            return "environment (" + std::string(setting.environment) + ")";
        case SettingOrigin::kCommandLine:
            return "command line";
    }
    return "default";
}

Result<bool> parse_bool(std::string_view text) {
    // The words util::env_bool accepts, in any case.
    std::string lower(text);
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (lower == "1" || lower == "true" || lower == "yes" || lower == "on") return true;
    if (lower == "0" || lower == "false" || lower == "no" || lower == "off") return false;
    return invalid("expected 1/0, true/false, yes/no or on/off, got '" + printable_text(text) +
                   "'");
}

Result<std::uint64_t> parse_unsigned(std::string_view text) {
    std::uint64_t value = 0;
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (text.empty() || ec != std::errc() || ptr != end) {
        return invalid("expected a non-negative integer, got '" + printable_text(text) + "'");
    }
    return value;
}

Result<void> check_value(const Setting& setting, std::string_view text) {
    // The file is one setting per line; a value with a line break in it would add another.
    if (text.find_first_of("\n\r") != std::string_view::npos) {
        return invalid("a value cannot contain a line break");
    }
    switch (setting.type) {
        case SettingType::kBool:
            TRY(parse_bool(text));
            break;
        case SettingType::kUnsigned:
            TRY(parse_unsigned(text));
            break;
        case SettingType::kSize:
            TRY(parse_size(text));
            break;
        case SettingType::kPath:
            if (text.empty()) return invalid("expected a path, got nothing");
            break;
        case SettingType::kLog:
            if (!is_log_setting(text)) {
                return invalid(
                    "expected off, warn, info, debug (or 0, 1, 2) or a path with a "
                    "'/', got '" +
                    printable_text(text) + "'");
            }
            break;
        case SettingType::kString:
            if (setting.check != nullptr) TRY(setting.check(text));
            break;
    }
    return ok();
}

Result<ConfigEntry> Config::get(std::string_view key) const {
    const Setting* setting = find_setting(schema_, key);
    if (setting == nullptr) return unknown_key(schema_, {}, key);
    return entries_[index_of(schema_, *setting)];
}

Result<bool> Config::get_bool(std::string_view key) const {
    TRY_ASSIGN(const ConfigEntry entry, get(key));
    if (entry.setting->type != SettingType::kBool) {
        return invalid(std::string(key) + " is not a yes/no setting");
    }
    return parse_bool(entry.value);
}

Result<std::uint64_t> Config::get_uint(std::string_view key) const {
    TRY_ASSIGN(const ConfigEntry entry, get(key));
    if (entry.setting->type == SettingType::kSize) return parse_size(entry.value);
    if (entry.setting->type == SettingType::kUnsigned) return parse_unsigned(entry.value);
    return invalid(std::string(key) + " is not a number");
}

Result<Config> load_config(const SettingsSchema& schema, std::string_view directory,
                           Result<ConfigEntry> resolved,
                           const std::map<std::string, std::string>& command_line_overrides,
                           const ConfigFile* file) {
    Config config;
    config.schema_ = schema;
    config.entries_.reserve(schema.settings.size());
    for (const Setting& setting : schema.settings) {
        config.entries_.push_back(
            make_entry(setting, std::string(setting.default_value), SettingOrigin::kDefault, {}));
    }
    const Setting* dir_setting = find_setting(schema, schema.directory_key);
    if (dir_setting == nullptr) {
        return invalid("the settings table has no '" + std::string(schema.directory_key) + "'");
    }
    const Setting& dir = *dir_setting;
    config.dir_index_ = index_of(schema, dir);

    // A bad override is the caller's error; no directory at all only leaves it empty.
    if (!resolved && resolved.error().code() == Errc::kInvalidArgument) {
        return std::move(resolved).error();
    }
    if (directory.empty()) {
        if (resolved) config.entries_[config.dir_index_] = std::move(*resolved);
    } else if (resolved && resolved->value == directory) {
        config.entries_[config.dir_index_] = std::move(*resolved);
    } else {
        config.entries_[config.dir_index_] =
            make_entry(dir, std::string(directory), SettingOrigin::kCommandLine, {});
    }
    if (!config.directory().empty()) {
        config.config_file_ = join_path(config.directory(), schema.file_name);
    }

    if (file != nullptr) {
        if (file->error) config.problems_.push_back(*file->error);
        if (file->text) {
            ParsedConfigFile parsed = parse_config_file(schema, *file->text, file->path);
            for (FileSetting& line : parsed.settings) {
                config.entries_[index_of(schema, *line.setting)] = make_entry(
                    *line.setting, std::move(line.value), SettingOrigin::kConfigFile, file->path);
            }
            config.problems_.insert(config.problems_.end(), parsed.problems.begin(),
                                    parsed.problems.end());
        }
    }

    for (const Setting& setting : schema.settings) {
        if (setting.key == schema.directory_key)
            continue;  // resolved above, before the file was read
        const std::string name(setting.environment);
        auto value = env_string(name.c_str());
        if (!value) continue;
        if (auto checked = check_value(setting, *value); !checked) {
            config.problems_.push_back(name + ": " + checked.error().message());
            fall_back(schema, setting, config.entries_, SettingOrigin::kEnvironment, {});
            continue;
        }
        config.entries_[index_of(schema, setting)] =
            make_entry(setting, std::move(*value), SettingOrigin::kEnvironment, {});
    }

    for (const auto& [key, value] : command_line_overrides) {
        if (key == schema.directory_key) continue;
        const Setting* setting = find_setting(schema, key);
        if (setting == nullptr) return unknown_key(schema, "command line", key);
        if (setting->scope == SettingScope::kEnvironmentOnly) {
            return invalid("command line: " + key + " can only be set in the environment (" +
                           std::string(setting->environment) + ")");
        }
        if (auto checked = check_value(*setting, value); !checked) {
            return invalid("command line: " + key + ": " + checked.error().message());
        }
        config.entries_[index_of(schema, *setting)] =
            make_entry(*setting, value, SettingOrigin::kCommandLine, {});
    }
    return config;
}

std::string updated_config_text(std::string_view old, std::string_view key,
                                std::string_view value) {
    const std::string new_line = std::string(key) + " = " + std::string(trim(value));
    std::string updated;
    updated.reserve(old.size() + new_line.size() + 1);
    bool replaced = false;
    for (const std::string_view line : split_lines(old)) {
        const ConfigLine parsed = split_line(line);
        if (parsed.is_setting && parsed.key == key) {
            // One line per key afterwards: a later duplicate would silently win on reading.
            if (replaced) continue;
            updated += new_line;
            replaced = true;
        } else {
            updated += line;
        }
        updated += '\n';
    }
    if (!replaced) updated += new_line + '\n';
    return updated;
}

Result<void> check_file_setting(const SettingsSchema& schema, std::string_view key,
                                std::string_view value) {
    const Setting* setting = find_setting(schema, key);
    if (setting == nullptr) return unknown_key(schema, {}, key);
    if (setting->scope != SettingScope::kAnywhere) {
        return invalid(std::string(key) + " cannot be set in " + std::string(schema.file_name) +
                       "; use " + set_instead(schema, *setting));
    }
    if (auto checked = check_value(*setting, trim(value)); !checked) {
        return invalid(std::string(key) + ": " + checked.error().message());
    }
    return file_may_hold(schema, *setting, trim(value));
}

std::string settings_markdown_table(std::span<const Setting> settings) {
    std::string table =
        "| setting | environment | default | meaning |\n"
        "|---|---|---|---|\n";
    for (const Setting& setting : settings) {
        table += "| `";
        table += setting.key;
        table += "` | `";
        table += setting.environment;
        table += "` | ";
        table += setting.default_text;
        table += " | ";
        table += setting.description;
        table += " |\n";
    }
    return table;
}

}  // namespace kcache::util
