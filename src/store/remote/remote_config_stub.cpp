// SPDX-License-Identifier: Apache-2.0
// TEMPORARY (branch redis-connection): a minimal RedisEndpoint::redacted() so that the connection
// links and is tested before the remote-config branch lands. Its remote_config.cpp defines the
// real one; delete this file when merging it.
#include <string>

#include "store/remote/remote_config.hpp"

namespace kcache::store::remote {

std::string RedisEndpoint::redacted() const {
    std::string url = transport == Transport::kUnix ? "redis+unix:" : "redis://";
    if (transport == Transport::kTcp && (!user.empty() || !password.empty())) {
        url += user;
        if (!password.empty()) url += ":***";
        url += "@";
    }
    url += transport == Transport::kUnix ? socket_path : host + ":" + std::to_string(port);
    if (db != 0) url += (transport == Transport::kUnix ? "?db=" : "/") + std::to_string(db);
    return url;
}

}  // namespace kcache::store::remote
