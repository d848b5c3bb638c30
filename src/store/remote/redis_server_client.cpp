// SPDX-License-Identifier: Apache-2.0
#include "store/remote/redis_server_client.hpp"

#include <utility>

#include "util/log.hpp"

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
    : endpoint_(std::move(endpoint)),
      name_(endpoint_.redacted()),
      deadlines_(deadlines),
      max_reply_bytes_(max_reply_bytes),
      counters_(counters),
      breaker_(kFirstBackOff, kMaxBackOff) {}

Result<std::unique_ptr<RedisConnection>> RedisServerClient::take() {
    if (!breaker_.allow()) {
        RemoteCounters::add(counters_.skipped);
        return Error(Errc::kIoError, name_ + " is set aside after a failure; retried later");
    }
    {
        std::lock_guard lock(pool_mutex_);
        if (!idle_.empty()) {
            auto connection = std::move(idle_.back());
            idle_.pop_back();
            return connection;
        }
    }
    RedisFailure why = RedisFailure::kNone;
    auto opened = RedisConnection::open(endpoint_, deadlines_, max_reply_bytes_, &why);
    if (!opened) return failed(why, std::move(opened).error());
    return std::move(opened).value();
}

void RedisServerClient::give_back(std::unique_ptr<RedisConnection> connection) {
    std::lock_guard lock(pool_mutex_);
    if (idle_.size() < kMaxIdleConnections) idle_.push_back(std::move(connection));
}

Error RedisServerClient::failed(RedisFailure failure, Error error) {
    RemoteCounters::add(failure == RedisFailure::kTimeout ? counters_.timeouts : counters_.errors);
    if (breaker_.failed()) {
        RemoteCounters::add(counters_.breaker_openings);
        util::warn_once("remote-down:" + name_,
                        "remote server set aside (lookups go on without "
                        "it; retried later): " +
                            error.message());
    }
    return error;
}

template <class T>
Result<T> RedisServerClient::finish(std::unique_ptr<RedisConnection> connection, Result<T> result,
                                    std::uint64_t in_before, std::uint64_t out_before) {
    RemoteCounters::add(counters_.bytes_in, connection->bytes_in() - in_before);
    RemoteCounters::add(counters_.bytes_out, connection->bytes_out() - out_before);
    if (!result) return failed(connection->failure(), std::move(result).error());
    breaker_.succeeded();
    if (!connection->broken()) give_back(std::move(connection));
    return result;
}

Result<RedisReply> RedisServerClient::command(const std::vector<std::string_view>& args) {
    auto taken = take();
    if (!taken) return std::move(taken).error();
    std::unique_ptr<RedisConnection> connection = std::move(*taken);
    const std::uint64_t in = connection->bytes_in(), out = connection->bytes_out();
    auto reply = connection->command(args);
    return finish(std::move(connection), std::move(reply), in, out);
}

Result<std::vector<RedisReply>> RedisServerClient::pipeline(
    const std::vector<std::vector<std::string_view>>& commands, std::chrono::milliseconds total) {
    auto taken = take();
    if (!taken) return std::move(taken).error();
    std::unique_ptr<RedisConnection> connection = std::move(*taken);
    const std::uint64_t in = connection->bytes_in(), out = connection->bytes_out();
    auto replies = connection->pipeline(commands, total);
    return finish(std::move(connection), std::move(replies), in, out);
}

}  // namespace kcache::store::remote
