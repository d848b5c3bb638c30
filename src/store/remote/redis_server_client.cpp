// SPDX-License-Identifier: Apache-2.0
#include "store/remote/redis_server_client.hpp"

#include <unistd.h>

#include <utility>

#include "util/log.hpp"
#include "util/try.hpp"

namespace kcache::store::remote {
namespace {

// Idle connections kept per server: enough for a few threads missing at once; more are opened
// when needed and closed after use.
constexpr std::size_t kMaxIdleConnections = 4;
// A server set aside is probed again after this, doubling per failed probe up to the ceiling.
constexpr std::chrono::milliseconds kFirstBackOff{1000};
constexpr std::chrono::milliseconds kMaxBackOff{30000};

}  // namespace

RedisServerClient::RedisServerClient(RedisEndpoint endpoint, Deadlines deadlines,
                                     std::size_t max_reply_bytes, RemoteCounters& counters)
    : owner_(getpid()),
      endpoint_(std::move(endpoint)),
      name_(endpoint_.redacted()),
      deadlines_(deadlines),
      max_reply_bytes_(max_reply_bytes),
      counters_(counters),
      breaker_(kFirstBackOff, kMaxBackOff) {}

Result<RedisServerClient::Taken> RedisServerClient::take() {
    if (!breaker_.allow()) {
        RemoteCounters::add(counters_.skipped);
        return Error(Errc::kIoError, name_ + " is set aside after a failure; retried later");
    }
    {
        std::lock_guard lock(pool_mutex_);
        if (!idle_.empty()) {
            auto connection = std::move(idle_.back());
            idle_.pop_back();
            return Taken{std::move(connection), true};
        }
    }
    return open_new();
}

Result<RedisServerClient::Taken> RedisServerClient::open_new() {
    RedisFailure why = RedisFailure::kNone;
    auto opened = RedisConnection::open(endpoint_, deadlines_, max_reply_bytes_, &why);
    if (!opened) return failed(why, std::move(opened).error());
    return Taken{std::move(opened).value(), false};
}

void RedisServerClient::give_back(std::unique_ptr<RedisConnection> connection) {
    std::lock_guard lock(pool_mutex_);
    if (idle_.size() < kMaxIdleConnections) idle_.push_back(std::move(connection));
}

Error RedisServerClient::failed(RedisFailure failure, Error error) {
    if (failure == RedisFailure::kTooLarge) {
        // A value over the cap: the server is fine, and the caller counts the value.
        breaker_.succeeded();
        return error;
    }
    RemoteCounters::add(failure == RedisFailure::kTimeout ? counters_.timeouts : counters_.errors);
    if (breaker_.failed()) {
        RemoteCounters::add(counters_.breaker_openings);
        {
            // Connections to a server that failed are not trusted again.
            std::lock_guard lock(pool_mutex_);
            idle_.clear();
        }
        util::warn_once("remote-down:" + name_,
                        "remote server set aside (lookups go on without "
                        "it; retried later): " +
                            error.message());
    }
    return error;
}

template <class T, class Call>
Result<T> RedisServerClient::run(Call call, RedisFailure* why) {
    if (getpid() != owner_) {
        if (why != nullptr) *why = RedisFailure::kConnect;
        return Error(Errc::kIoError,
                     name_ + " is not used in a process forked after it was opened");
    }
    TRY_ASSIGN(Taken taken, take());
    for (;;) {
        RedisConnection& connection = *taken.connection;
        const std::uint64_t in = connection.bytes_in(), out = connection.bytes_out();
        Result<T> result = call(connection);
        RemoteCounters::add(counters_.bytes_in, connection.bytes_in() - in);
        RemoteCounters::add(counters_.bytes_out, connection.bytes_out() - out);
        if (result) {
            breaker_.succeeded();
            if (!connection.broken()) give_back(std::move(taken.connection));
            return result;
        }
        // An idle connection the server closed meanwhile (a restart, its idle timeout) fails at
        // once: one new connection is tried before the server is held at fault.
        if (taken.reused && connection.failure() == RedisFailure::kIo) {
            TRY_ASSIGN(taken, open_new());
            continue;
        }
        if (why != nullptr) *why = connection.failure();
        return failed(connection.failure(), std::move(result).error());
    }
}

Result<RedisReply> RedisServerClient::command(const std::vector<std::string_view>& args,
                                              RedisFailure* why) {
    return run<RedisReply>([&](RedisConnection& connection) { return connection.command(args); },
                           why);
}

Result<std::vector<RedisReply>> RedisServerClient::pipeline(
    const std::vector<std::vector<std::string_view>>& commands, std::chrono::milliseconds total) {
    return run<std::vector<RedisReply>>(
        [&](RedisConnection& connection) { return connection.pipeline(commands, total); });
}

}  // namespace kcache::store::remote
