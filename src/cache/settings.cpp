// SPDX-License-Identifier: Apache-2.0
// Loading and writing the settings through the accepted cache directory.
#include "cache/settings.hpp"

#include <chrono>

#include "util/env.hpp"
#include "util/log.hpp"

namespace kcache::cache {
namespace {

// Long enough for any writer: a set holds the lock for one small read and one small write.
constexpr std::chrono::seconds kConfigLockPatience{10};

bool flag(const util::Config& config, std::string_view key) {
    auto value = config.get_bool(key);
    return value && *value;
}

}  // namespace

store::DirectoryPolicy directory_policy(const util::Config& config) {
    store::DirectoryPolicy policy;
    policy.allow_shared = flag(config, "allow_shared_dir");
    policy.read_only = flag(config, "read_only");
    return policy;
}

Result<util::Config> load_settings(const std::map<std::string, std::string>& command_line) {
    // First without kcache.conf: what decides whether the directory may be trusted never comes
    // from a file inside it.
    auto outside = load_config({}, command_line);
    if (!outside) return outside;
    if (outside->directory().empty()) {
        util::set_log_setting(outside->get("log")->value);
        return outside;
    }
    util::ConfigFile file;
    file.path = outside->config_file();
    store::DirectoryPolicy policy = directory_policy(*outside);
    policy.create = false;  // reading settings makes nothing
    auto directory = store::CacheDirectory::open(outside->directory(), policy);
    if (directory) {
        auto text = (*directory)->read(kConfigFileName, store::kMaxSmallFileBytes);
        if (text) {
            file.text = std::move(*text);
        } else {
            file.error = file.path + " not read: " + text.error().message();
        }
    }
    // A directory that is refused or unusable leaves kcache.conf unread; that is no setting's
    // fault, and whatever uses the directory (the disk tier, a command) says why, once.
    auto config = load_config({}, command_line, &file);
    if (config) util::set_log_setting(config->get("log")->value);
    return config;
}

void apply_environment_log_setting() {
    if (util::log_setting_applied()) return;
    util::set_log_setting(util::env_string("KCACHE_LOG").value_or(""));
}

Result<void> set_config_value(const std::string& directory, const store::DirectoryPolicy& policy,
                              std::string_view key, std::string_view value) {
    if (auto allowed = check_file_setting(key, value); !allowed) return allowed;
    if (directory.empty()) {
        return Error(Errc::kInvalidArgument, "no cache directory to write kcache.conf in");
    }
    store::DirectoryPolicy making = policy;
    making.create = true;
    auto opened = store::CacheDirectory::open(directory, making);
    if (!opened) return opened.error();
    const store::CacheDirectory& dir = **opened;
    // Without the lock, two processes setting different keys would each write the file they
    // read, and the later rename would drop the other's key.
    const std::string lock_name = std::string(kConfigFileName) + ".lock";
    const auto lock = dir.lock(lock_name, kConfigLockPatience);
    if (!lock) {
        return Error(Errc::kIoError, "could not lock " + dir.path_of(lock_name) +
                                         " (it cannot be opened, or another kcache held it for " +
                                         std::to_string(kConfigLockPatience.count()) + " s)");
    }
    auto old = dir.read(kConfigFileName, store::kMaxSmallFileBytes);
    if (!old) return old.error();
    return dir.write_atomic(kConfigFileName,
                            util::updated_config_text(old->value_or(""), key, value));
}

}  // namespace kcache::cache
