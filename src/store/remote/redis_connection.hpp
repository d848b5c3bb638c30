// SPDX-License-Identifier: Apache-2.0
// One connection to one Redis server, with kcache's own deadlines: hiredis parses RESP
// (redis_reply.hpp), and this file owns the socket, so that a server that trickles one byte at a
// time cannot stretch a request past its total deadline (hiredis's own timeouts are per read()).
// Not thread safe: one user at a time (redis_backend.hpp pools them).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kcache/result.hpp"
#include "store/remote/redis_reply.hpp"
#include "store/remote/remote_config.hpp"
#include "util/unique_fd.hpp"

namespace kcache::store::remote {

struct Deadlines {
    std::chrono::milliseconds connect{100};      // connect, AUTH and SELECT together
    std::chrono::milliseconds first_byte{1000};  // a request sent to its reply's first byte
    std::chrono::milliseconds total{1000};       // a request sent to its reply's last byte
    // Both grow with the bytes a request and its reply move (a slow link's time for them).
    // After a request's last byte, its reply is waited for this long without sleeping first.
    std::chrono::microseconds busy_poll{0};
};

// How a request failed, beyond its message: the breaker and the counters tell these apart.
enum class RedisFailure : std::uint8_t {
    kNone,
    kConnect,   // refused, unreachable, no such socket, name not resolved
    kTimeout,   // a deadline passed (connect, first byte or total)
    kIo,        // the connection broke (reset, closed by the server)
    kProtocol,  // bytes that are not RESP
    kTooLarge,  // a reply over the size bound: the value is at fault, not the server
    kAuth,      // AUTH or SELECT refused (WRONGPASS, NOPERM on SELECT, bad db)
};
const char* redis_failure_name(RedisFailure failure) noexcept;

class RedisConnection {
public:
    // Connects (TCP with TCP_NODELAY, or a unix socket), then AUTH (with the endpoint's user and
    // password, if any) and SELECT (db != 0), all within deadlines.connect. The error's message
    // names the endpoint redacted (and never the password); `why`, if given, says which kind
    // (there is no connection to ask failure() of).
    static Result<std::unique_ptr<RedisConnection>> open(const RedisEndpoint& endpoint,
                                                         const Deadlines& deadlines,
                                                         std::size_t max_reply_bytes,
                                                         RedisFailure* why = nullptr);

    // Sends one command and reads its reply within the deadlines. An error reply (NOPERM, OOM) is
    // a reply, not a failure. A failure leaves the connection broken(): a late reply would
    // otherwise answer the next request.
    Result<RedisReply> command(const std::vector<std::string_view>& args);
    // Sends every command at once and reads their replies in order, within one total deadline
    // given by the caller (a pipeline of many values needs longer than one request).
    Result<std::vector<RedisReply>> pipeline(
        const std::vector<std::vector<std::string_view>>& commands,
        std::chrono::milliseconds total);

    bool broken() const noexcept { return broken_; }
    // Why the last call failed (kNone after a success).
    RedisFailure failure() const noexcept { return failure_; }
    // Bytes sent and received since the connection opened (counted for `kcache -s`).
    std::uint64_t bytes_out() const noexcept { return bytes_out_; }
    std::uint64_t bytes_in() const noexcept { return bytes_in_; }

    ~RedisConnection();
    RedisConnection(const RedisConnection&) = delete;
    RedisConnection& operator=(const RedisConnection&) = delete;

private:
    RedisConnection(util::UniqueFd fd, const RedisEndpoint& endpoint, const Deadlines& deadlines,
                    std::size_t max_reply_bytes);
    // Sends `commands` and reads one reply each, the first byte within `first_byte` and the last
    // within `total` of `start`; a failure breaks the connection.
    Result<std::vector<RedisReply>> exchange(
        const std::vector<std::vector<std::string_view>>& commands,
        std::chrono::steady_clock::time_point start, std::chrono::milliseconds first_byte,
        std::chrono::milliseconds total);

    util::UniqueFd fd_;
    std::string name_;  // the endpoint, redacted
    Deadlines deadlines_;
    ReplyReader reader_;
    std::vector<char> read_buffer_;  // what one recv() may fill, kept between requests
    bool broken_ = false;
    RedisFailure failure_ = RedisFailure::kNone;
    std::uint64_t bytes_out_ = 0, bytes_in_ = 0;
};

}  // namespace kcache::store::remote
