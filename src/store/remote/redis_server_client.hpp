// SPDX-License-Identifier: Apache-2.0
// One Redis server as the remote tier uses it: a small pool of connections, a circuit breaker,
// and the counters of what its requests cost. Thread safe. Not used by a forked child: the pooled
// sockets are shared with the parent, whose replies the child would read (and the reverse), and
// a mutex a parent thread held stays held; there every request fails at once, sending nothing.
#pragma once

#include <sys/types.h>

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
    // `why`, if given, says how a failed request failed (kTooLarge: a value over the cap, which
    // the caller counts, once per value).
    Result<RedisReply> command(const std::vector<std::string_view>& args,
                               RedisFailure* why = nullptr);
    Result<std::vector<RedisReply>> pipeline(
        const std::vector<std::vector<std::string_view>>& commands,
        std::chrono::milliseconds total);

    // The server, redacted: for messages.
    const std::string& name() const noexcept { return name_; }
    bool set_aside() const { return breaker_.open(); }

private:
    struct Taken {
        std::unique_ptr<RedisConnection> connection;
        bool reused = false;  // from the pool: the server may have closed it meanwhile
    };
    // A connection from the pool or a new one; an Error (counted) when none can be had.
    Result<Taken> take();
    Result<Taken> open_new();
    void give_back(std::unique_ptr<RedisConnection> connection);
    // Counts a failure of a call (or of connecting) and feeds the breaker; a value over the size
    // cap is the value's fault: neither.
    Error failed(RedisFailure failure, Error error);
    // `call` on a connection, counted; a reused connection that the server had closed is replaced
    // once.
    template <class T, class Call>
    Result<T> run(Call call, RedisFailure* why = nullptr);

    const pid_t owner_;  // the process whose connections these are
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
