// SPDX-License-Identifier: Apache-2.0
#include "cache/remote_options.hpp"

#include <utility>

#include "util/env.hpp"
#include "util/try.hpp"

namespace kcache::cache {

Result<store::remote::RemoteOptions> remote_options(const CacheOptions& options) {
    store::remote::RemoteOptions remote;
    if (options.remote.empty()) return remote;
    TRY_ASSIGN(remote.backends, store::remote::parse_remote_setting(options.remote));
    remote.environment_password = util::env_string("KCACHE_REMOTE_PASSWORD");
    remote.lease_time = options.remote_lease_time;
    remote.lease_wait = options.remote_lease_wait;
    return remote;
}

}  // namespace kcache::cache
