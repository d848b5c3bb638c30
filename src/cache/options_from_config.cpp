// SPDX-License-Identifier: Apache-2.0
// Fills CacheOptions from the resolved util::Config, so that kcache.conf, the environment and the
// command line reach the cache through one precedence.
#include "cache/options_from_config.hpp"

#include <cstddef>
#include <cstdint>
#include <utility>

#include "util/log.hpp"
#include "util/try.hpp"

namespace kcache::cache {

Result<CacheOptions> to_cache_options(const util::Config& config) {
    CacheOptions options;
    // load_config() checked every value, so these reads fail only if the table and this function
    // disagree on a key or a type: an error rather than a silently default option.
    TRY_ASSIGN(const std::uint64_t max_entries, config.get_uint("max_entries"));
    options.max_entries = static_cast<std::size_t>(max_entries);
    TRY_ASSIGN(options.verify, config.get_bool("verify"));
    TRY_ASSIGN(options.bundle_warm_ups, config.get_bool("bundles"));
    TRY_ASSIGN(options.allow_shared_directory, config.get_bool("allow_shared_dir"));
    TRY_ASSIGN(options.read_only, config.get_bool("read_only"));
    TRY_ASSIGN(const std::uint64_t workers, config.get_uint("compile_workers"));
    options.compile_workers = static_cast<std::size_t>(workers);
    TRY_ASSIGN(const util::ConfigEntry worker, config.get("compile_worker"));
    options.compile_worker_command = worker.value;
    TRY_ASSIGN(options.disk_max_bytes, config.get_uint("max_size"));
    TRY_ASSIGN(options.disk_max_files, config.get_uint("max_files"));
    TRY_ASSIGN(const util::ConfigEntry remote, config.get("remote"));
    options.remote = remote.value;
    TRY_ASSIGN(const bool disk, config.get_bool("disk"));
    if (disk) {
        if (config.directory().empty()) {
            util::warn_once("no-directory",
                            "no cache directory (set KCACHE_DIR; neither XDG_CACHE_HOME nor HOME "
                            "is set): working from memory");
        }
        options.disk_directory = config.directory();
    }
    TRY(options.check());
    options.configuration_problems = config.problems();
    return options;
}

}  // namespace kcache::cache
