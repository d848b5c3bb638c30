// SPDX-License-Identifier: Apache-2.0
// kcache's settings table and its rules: which directory holds kcache.conf, and what the
// messages call things.
#include "cache/settings_table.hpp"

#include <array>
#include <utility>

#include "store/disk_store.hpp"
#include "store/remote/remote_config.hpp"
#include "util/env.hpp"
#include "util/try.hpp"

namespace kcache::cache {
namespace {

using util::SettingOrigin;

Result<void> check_remote(std::string_view value) {
    TRY(store::remote::parse_remote_setting(value));
    return ok();
}

std::string printable_remote(std::string_view value) {
    return store::remote::redact_remote_setting(value);
}

// The meanings are the README's: settings_markdown_table() prints them, and a test holds the
// README to that table.
constexpr std::array kSettings = {
    util::Setting{
        "log", "KCACHE_LOG", util::SettingType::kLog, util::SettingScope::kAnywhere, "warn",
        "`warn` (each warning once, on stderr)",
        "`off`/`0`: nothing; `info`/`1`: also one line per miss, compile, eviction; "
        "`debug`/`2`: more; a path containing `/` (not in `kcache.conf`): append every line "
        "to that file"},
    util::Setting{
        "verify",
        "KCACHE_VERIFY",
        util::SettingType::kBool,
        util::SettingScope::kAnywhere,
        "0",
        "`0`",
        "`1`: on every hit, run the generator again and compare fingerprints; a key reused "
        "for different source is a `key-conflict` error naming the key (a bad value turns it "
        "on)",
        {},
        "1"},
    util::Setting{"bundles", "KCACHE_BUNDLES", util::SettingType::kBool,
                  util::SettingScope::kAnywhere, "1", "`1`",
                  "`1`: `warm_up` links its PTX modules a few to a module after it (a bundle), "
                  "stores them, and loads the bundles a tier has as one module each (the "
                  "driver's cost of a module load grows with the modules loaded); `0`: one "
                  "module per key"},
    util::Setting{"max_entries", "KCACHE_MAX_ENTRIES", util::SettingType::kUnsigned,
                  util::SettingScope::kAnywhere, "1024", "`1024`",
                  "loaded (key, arch) entries kept; least recently used evicted beyond it"},
    util::Setting{"dir", "KCACHE_DIR", util::SettingType::kPath, util::SettingScope::kNotInFile, "",
                  "`$XDG_CACHE_HOME/kcache`, else `$HOME/.cache/kcache`",
                  "the disk tier: one file per compiled artifact; created mode 0700; holds "
                  "`kcache.conf`, so it is set by `-d` or `KCACHE_DIR`, never in that file",
                  "kcache.conf lives in it"},
    util::Setting{"disk", "KCACHE_DISK", util::SettingType::kBool, util::SettingScope::kAnywhere,
                  "1", "`1`", "`0`: no disk tier (memory only)"},
    util::Setting{
        "allow_shared_dir", "KCACHE_ALLOW_SHARED_DIR", util::SettingType::kBool,
        util::SettingScope::kNotInFile, "0", "`0`",
        "`1`: accept a group- or world-writable cache directory, or another user's (refused "
        "otherwise: anyone who can write there could plant kernels); environment or command "
        "line only",
        "it relaxes a check of the directory that holds the file", "0"},
    util::Setting{
        "read_only", "KCACHE_READ_ONLY", util::SettingType::kBool, util::SettingScope::kNotInFile,
        "0", "`0`",
        "`1`: read the disk tier, write nothing to it (no entries, stamps, statistics or "
        "cleanups), and accept a directory owned by root that others cannot write (a cache "
        "baked into an image); environment or command line only",
        "it relaxes a check of the directory that holds the file", "1"},
    util::Setting{
        "max_size", "KCACHE_MAX_SIZE", util::SettingType::kSize, util::SettingScope::kAnywhere,
        "4Gi", "`4Gi`",
        "byte budget of the disk directory (units as ccache: `k M G T`, `Ki Mi Gi Ti`; a bare "
        "number is G; `0`: none); beyond it the least recently used entries go (recency = "
        "the entry file's mtime, which a hit refreshes when older than 10 minutes), by one "
        "process at a time"},
    util::Setting{"max_files", "KCACHE_MAX_FILES", util::SettingType::kUnsigned,
                  util::SettingScope::kAnywhere, "0", "`0` (none)",
                  "file budget of the disk directory, same eviction"},
    util::Setting{"compile_workers", "KCACHE_COMPILE_WORKERS", util::SettingType::kUnsigned,
                  util::SettingScope::kAnywhere, "0", "`0`",
                  "compile CUDA C++ in this many worker processes (one process compiles as "
                  "many at once as it has NVRTCs, 4 by default: see below), which link PTX too "
                  "while idle; `0`: in this process"},
    util::Setting{
        "compile_worker", "KCACHE_COMPILE_WORKER", util::SettingType::kPath,
        util::SettingScope::kNotInFile, "", "a `kcache` beside the program",
        "the worker command (`kcache compile-worker`); unusable workers leave compiles in the "
        "process; environment or command line only",
        "it names a program to run"},
    util::Setting{
        "remote",
        "KCACHE_REMOTE",
        util::SettingType::kString,
        util::SettingScope::kAnywhere,
        "",
        "none",
        "the remote tier: Redis backends asked after memory and disk, separated by spaces: "
        "`redis://[USER@]HOST[:PORT][/DB]` or `redis+unix:/PATH[?db=N]`, each with attributes "
        "(docs/remote.md); passwords from `password-file=` or "
        "`KCACHE_REMOTE_PASSWORD`, never printed",
        {},
        {},
        check_remote,
        printable_remote},
    util::Setting{
        "nvrtc_library", "KCACHE_NVRTC_LIBRARY", util::SettingType::kPath,
        util::SettingScope::kEnvironmentOnly, "", "searched",
        "the NVRTC library to use; otherwise one already loaded, then `LD_LIBRARY_PATH`, "
        "`$CUDA_HOME`, `/usr/local/cuda`, system folders; environment only (found once per "
        "process)"},
    util::Setting{
        "nvjitlink_library", "KCACHE_NVJITLINK_LIBRARY", util::SettingType::kPath,
        util::SettingScope::kEnvironmentOnly, "", "searched",
        "the nvJitLink library to use, searched for as `nvrtc_library`; environment only"},
    util::Setting{
        "nvjitlink_copies", "KCACHE_NVJITLINK_COPIES", util::SettingType::kUnsigned,
        util::SettingScope::kEnvironmentOnly, "", "`3` (fewer with fewer cores)",
        "PTX links and CUDA C++ compiles that run at once in this process take copies of "
        "nvJitLink and NVRTC of their own, loaded at first need (one copy serialises its links, "
        "one NVRTC its compiles; see below), at most 15; `0`: none; environment only (read once "
        "per process)"},
};

constexpr std::string_view kDirKey = "dir";

}  // namespace

std::span<const util::Setting> settings() {
    return kSettings;
}

const util::SettingsSchema& settings_schema() {
    static const util::SettingsSchema schema{.settings = kSettings,
                                             .file_name = kConfigFileName,
                                             .directory_key = kDirKey,
                                             .directory_flag = "-d",
                                             .in_code = "CacheOptions in code"};
    return schema;
}

const util::Setting* find_setting(std::string_view key) {
    return util::find_setting(settings_schema(), key);
}

Result<util::ConfigEntry> config_directory(
    const std::map<std::string, std::string>& command_line_overrides) {
    const util::Setting& dir = *find_setting(kDirKey);
    if (const auto given = command_line_overrides.find(std::string(kDirKey));
        given != command_line_overrides.end()) {
        if (auto checked = util::check_value(dir, given->second); !checked) {
            return Error(Errc::kInvalidArgument, "command line: dir: " + checked.error().message());
        }
        return util::config_entry(dir, given->second, SettingOrigin::kCommandLine, {});
    }
    if (auto value = util::env_string(std::string(dir.environment).c_str())) {
        return util::config_entry(dir, *value, SettingOrigin::kEnvironment, {});
    }
    // Without KCACHE_DIR, the store's rule gives the default (and says when there is none).
    auto found = store::default_directory();
    if (!found) return found.error();
    return util::config_entry(dir, std::move(*found), SettingOrigin::kDefault, {});
}

Result<util::Config> load_config(std::string_view directory,
                                 const std::map<std::string, std::string>& command_line_overrides,
                                 const util::ConfigFile* file) {
    return util::load_config(settings_schema(), directory, config_directory(command_line_overrides),
                             command_line_overrides, file);
}

util::ParsedConfigFile parse_config_file(std::string_view text, std::string_view path) {
    return util::parse_config_file(settings_schema(), text, path);
}

Result<void> check_file_setting(std::string_view key, std::string_view value) {
    return util::check_file_setting(settings_schema(), key, value);
}

std::string settings_markdown_table() {
    return util::settings_markdown_table(kSettings);
}

}  // namespace kcache::cache
