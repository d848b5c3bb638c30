// SPDX-License-Identifier: Apache-2.0
// One Redis server as the remote tier uses it: a small pool of connections, a circuit breaker,
// and the counters of what its requests cost. Thread safe.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "kcache/result.hpp"
#include "store/remote/breaker.hpp"
#include "store/remote/redis_connection.hpp"
#include "store/remote/remote_config.hpp"
#include "store/remote/remote_stats.hpp"

namespace kcache::store::remote {

class RedisServerClient {
public:
    RedisServerClient(RedisEndpoint endpoint, Deadlines deadlines, std::size_t max_reply_bytes,
                      RemoteCounters& counters);

    // One command through a pooled connection. An error reply (NOPERM, OOM) is a reply. An Error
    // when the breaker has set the server aside (counted as skipped, nothing sent) or the request
    // failed (counted as a timeout or an error; the breaker opens, and the first failure of a
    // period is warned of once).
    Result<RedisReply> command(const std::vector<std::string_view>& args);
    Result<std::vector<RedisReply>> pipeline(
        const std::vector<std::vector<std::string_view>>& commands,
        std::chrono::milliseconds total);

    // The server, redacted: for messages.
    const std::string& name() const noexcept { return name_; }
    bool set_aside() const { return breaker_.open(); }

private:
    // A connection from the pool or a new one; an Error (counted) when none can be had.
    Result<std::unique_ptr<RedisConnection>> take();
    void give_back(std::unique_ptr<RedisConnection> connection);
    // Counts the failure of `connection`'s last call (or of connecting), feeds the breaker.
    Error failed(RedisFailure failure, Error error);
    template <class T>
    Result<T> finish(std::unique_ptr<RedisConnection> connection, Result<T> result,
                     std::uint64_t in_before, std::uint64_t out_before);

    const RedisEndpoint endpoint_;
    const std::string name_;
    const Deadlines deadlines_;
    const std::size_t max_reply_bytes_;
    RemoteCounters& counters_;
    CircuitBreaker breaker_;
    std::mutex pool_mutex_;
    std::vector<std::unique_ptr<RedisConnection>> idle_;  // guarded by pool_mutex_
};

}  // namespace kcache::store::remote
