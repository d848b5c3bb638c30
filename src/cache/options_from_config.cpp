// SPDX-License-Identifier: Apache-2.0
// Fills CacheOptions from the resolved util::Config, so that kcache.conf, the environment and the
// command line reach the cache through one precedence.
#include "cache/options_from_config.hpp"

#include <cstddef>
#include <utility>

#include "util/log.hpp"

namespace kcache::cache {

Result<CacheOptions> to_cache_options(const util::Config& config) {
    CacheOptions options;
    // load_config() checked every value, so these reads fail only if the table and this function
    // disagree on a key or a type: an error rather than a silently default option.
    auto max_entries = config.get_uint("max_entries");
    if (!max_entries) return std::move(max_entries).error();
    options.max_entries = static_cast<std::size_t>(*max_entries);
    auto verify = config.get_bool("verify");
    if (!verify) return std::move(verify).error();
    options.verify = *verify;
    auto shared = config.get_bool("allow_shared_dir");
    if (!shared) return std::move(shared).error();
    options.allow_shared_directory = *shared;
    auto read_only = config.get_bool("read_only");
    if (!read_only) return std::move(read_only).error();
    options.read_only = *read_only;
    auto workers = config.get_uint("compile_workers");
    if (!workers) return std::move(workers).error();
    options.compile_workers = static_cast<std::size_t>(*workers);
    auto worker = config.get("compile_worker");
    if (!worker) return std::move(worker).error();
    options.compile_worker_command = worker->value;
    auto max_size = config.get_uint("max_size");
    if (!max_size) return std::move(max_size).error();
    options.disk_max_bytes = *max_size;
    auto max_files = config.get_uint("max_files");
    if (!max_files) return std::move(max_files).error();
    options.disk_max_files = *max_files;
    auto disk = config.get_bool("disk");
    if (!disk) return std::move(disk).error();
    if (*disk) {
        if (config.directory().empty()) {
            util::warn_once("no-directory",
                            "no cache directory (set KCACHE_DIR; neither XDG_CACHE_HOME nor HOME "
                            "is set): working from memory");
        }
        options.disk_directory = config.directory();
    }
    if (auto checked = options.check(); !checked) return std::move(checked).error();
    options.configuration_problems = config.problems();
    return options;
}

}  // namespace kcache::cache
