// SPDX-License-Identifier: Apache-2.0
// The socket is non-blocking from the start and every wait is one poll() bounded by what is left
// of its deadline, so that no sequence of slow connects, partial writes or single-byte reads can
// add up to more than the deadline (hiredis's own timeouts restart with every read()).
#include "store/remote/redis_connection.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>
#include <utility>

#include "util/try.hpp"

namespace kcache::store::remote {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr std::size_t kReadChunk = std::size_t{64} * 1024;

// The slowest link a large value is expected to cross (bytes per second): beyond what a request's
// timeout covers, its deadlines grow by the time its bytes take at this rate.
constexpr std::uint64_t kSlowestTransfer = std::uint64_t{8} << 20;

Clock::duration transfer_time(std::uint64_t bytes) {
    return std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(static_cast<double>(bytes) / kSlowestTransfer));
}

Error to_error(const std::string& name, RedisFailure kind, const std::string& what) {
    const Errc code = kind == RedisFailure::kProtocol || kind == RedisFailure::kTooLarge
                          ? Errc::kCorruptEntry
                          : Errc::kIoError;
    return Error(code, "redis " + name + ": " + what);
}

std::string errno_text(int error) {
    return std::strerror(error);
}

// Milliseconds left until `deadline` for poll(), rounded up so that a wait never ends early and
// spins; 0 once it has passed.
int remaining_ms(Clock::time_point deadline) {
    const auto left = deadline - Clock::now();
    if (left <= Clock::duration::zero()) return 0;
    return static_cast<int>(std::chrono::ceil<milliseconds>(left).count());
}

std::string describe_ms(milliseconds duration) {
    return std::to_string(duration.count()) + " ms";
}

// Waits for `events` on `fd` until `deadline`: its revents, 0 when the deadline passed, -1 with
// errno on a poll failure. Until `spin_until` it asks without sleeping.
int wait_for(int fd, short events, Clock::time_point deadline,
             std::optional<Clock::time_point> spin_until = std::nullopt) {
    if (spin_until) {
        const auto until = std::min(*spin_until, deadline);
        do {
            pollfd pfd{fd, events, 0};
            const int n = ::poll(&pfd, 1, 0);
            if (n > 0) return pfd.revents;
            if (n < 0 && errno != EINTR) return -1;
        } while (Clock::now() < until);
    }
    for (;;) {
        pollfd pfd{fd, events, 0};
        const int left = remaining_ms(deadline);
        const int n = ::poll(&pfd, 1, left);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -1;
        if (n == 0) {
            if (left == 0 || Clock::now() >= deadline) return 0;
            continue;
        }
        return pfd.revents;
    }
}

// One non-blocking connect to `address`, finished within `deadline`: the socket, or why not.
struct Connected {
    util::UniqueFd fd;
    RedisFailure failure = RedisFailure::kNone;
    std::string what;
};

Connected connect_to(const sockaddr* address, socklen_t length, int family,
                     Clock::time_point deadline, milliseconds budget) {
    Connected out;
    out.fd = util::UniqueFd(::socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!out.fd) {
        out.failure = RedisFailure::kConnect;
        out.what = "socket: " + errno_text(errno);
        return out;
    }
    int rc;
    do {
        rc = ::connect(out.fd.get(), address, length);
    } while (rc != 0 && errno == EINTR);
    // A unix socket whose listener's queue is full says EAGAIN; it is refused for now.
    if (rc != 0 && errno != EINPROGRESS) {
        out.failure = RedisFailure::kConnect;
        out.what = "connect: " + errno_text(errno);
        out.fd.reset();
        return out;
    }
    if (rc != 0) {
        const int revents = wait_for(out.fd.get(), POLLOUT, deadline);
        if (revents == 0) {
            out.failure = RedisFailure::kTimeout;
            out.what = "connect timed out after " + describe_ms(budget);
            out.fd.reset();
            return out;
        }
        int error = 0;
        socklen_t size = sizeof error;
        if (revents < 0 || ::getsockopt(out.fd.get(), SOL_SOCKET, SO_ERROR, &error, &size) != 0) {
            error = errno;
        }
        if (error != 0) {
            out.failure = RedisFailure::kConnect;
            out.what = "connect: " + errno_text(error);
            out.fd.reset();
            return out;
        }
    }
    return out;
}

// A name resolution left to a thread of its own, which outlives a caller that stops waiting.
struct Resolution {
    std::mutex mutex;
    std::condition_variable done_changed;
    bool done = false;
    bool abandoned = false;  // the caller gave up: the thread frees what it finds
    int rc = 0;
    addrinfo* found = nullptr;
};

// `host`'s addresses into `*found` (to be freed with freeaddrinfo), within `deadline`; otherwise
// why not. getaddrinfo has no deadline of its own and may wait seconds on a name server that does
// not answer, so a name (not a numeric address) is resolved on a thread, abandoned to finish on
// its own if the deadline passes first.
Connected resolve(const std::string& host, std::uint16_t port, Clock::time_point deadline,
                  milliseconds budget, addrinfo** found) {
    *found = nullptr;
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV | AI_NUMERICHOST;
    const std::string service = std::to_string(port);
    int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, found);
    if (rc == EAI_NONAME) {
        hints.ai_flags = AI_NUMERICSERV;
        auto resolution = std::make_shared<Resolution>();
        try {
            std::thread([resolution, host, service, hints] {
                addrinfo* list = nullptr;
                const int result = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &list);
                std::lock_guard lock(resolution->mutex);
                if (resolution->abandoned) {
                    if (list != nullptr) ::freeaddrinfo(list);
                    return;
                }
                resolution->rc = result;
                resolution->found = list;
                resolution->done = true;
                resolution->done_changed.notify_all();
            }).detach();
        } catch (const std::system_error& e) {
            return {{}, RedisFailure::kConnect, std::string("cannot resolve host: ") + e.what()};
        }
        std::unique_lock lock(resolution->mutex);
        if (!resolution->done_changed.wait_until(lock, deadline,
                                                 [&] { return resolution->done; })) {
            resolution->abandoned = true;
            return {{},
                    RedisFailure::kTimeout,
                    "resolving the host timed out after " + describe_ms(budget)};
        }
        rc = resolution->rc;
        *found = resolution->found;
    }
    if (rc != 0) {
        if (*found != nullptr) ::freeaddrinfo(std::exchange(*found, nullptr));
        return {
            {}, RedisFailure::kConnect, "cannot resolve host: " + std::string(gai_strerror(rc))};
    }
    return {};
}

Connected connect_endpoint(const RedisEndpoint& endpoint, Clock::time_point deadline,
                           milliseconds budget) {
    if (endpoint.transport == RedisEndpoint::Transport::kUnix) {
        sockaddr_un address{};
        address.sun_family = AF_UNIX;
        if (endpoint.socket_path.empty() ||
            endpoint.socket_path.size() >= sizeof address.sun_path) {
            return {{}, RedisFailure::kConnect, "unusable socket path"};
        }
        std::memcpy(address.sun_path, endpoint.socket_path.data(), endpoint.socket_path.size());
        return connect_to(reinterpret_cast<const sockaddr*>(&address), sizeof address, AF_UNIX,
                          deadline, budget);
    }
    std::string host = endpoint.host;
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
        host = host.substr(1, host.size() - 2);
    }
    addrinfo* found = nullptr;
    Connected resolving = resolve(host, endpoint.port, deadline, budget, &found);
    if (found == nullptr) return resolving;
    Connected last{{}, RedisFailure::kConnect, "no address"};
    // Each address of the name in turn, all within the one deadline.
    for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
        last = connect_to(a->ai_addr, a->ai_addrlen, a->ai_family, deadline, budget);
        if (last.fd || last.failure == RedisFailure::kTimeout) break;
    }
    ::freeaddrinfo(found);
    if (last.fd) {
        const int one = 1;
        // Requests are small and wait for their reply: Nagle's delay would only add latency.
        (void)::setsockopt(last.fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    return last;
}

// `text` with every occurrence of `secret` replaced: a server's error reply is its own text, and
// a hostile one could echo what it was sent into kcache's logs.
std::string without(std::string text, const std::string& secret) {
    if (secret.empty()) return text;
    for (std::size_t at; (at = text.find(secret)) != std::string::npos;) {
        text.replace(at, secret.size(), "***");
    }
    return text;
}

}  // namespace

const char* redis_failure_name(RedisFailure failure) noexcept {
    switch (failure) {
        case RedisFailure::kNone:
            return "none";
        case RedisFailure::kConnect:
            return "connect";
        case RedisFailure::kTimeout:
            return "timeout";
        case RedisFailure::kIo:
            return "io";
        case RedisFailure::kProtocol:
            return "protocol";
        case RedisFailure::kTooLarge:
            return "too large";
        case RedisFailure::kAuth:
            return "auth";
    }
    return "unknown";
}

RedisConnection::RedisConnection(util::UniqueFd fd, const RedisEndpoint& endpoint,
                                 const Deadlines& deadlines, std::size_t max_reply_bytes)
    : fd_(std::move(fd)),
      name_(endpoint.redacted()),
      deadlines_(deadlines),
      reader_(max_reply_bytes) {}

RedisConnection::~RedisConnection() = default;

Result<std::unique_ptr<RedisConnection>> RedisConnection::open(const RedisEndpoint& endpoint,
                                                               const Deadlines& deadlines,
                                                               std::size_t max_reply_bytes,
                                                               RedisFailure* why) {
    if (why != nullptr) *why = RedisFailure::kNone;
    const auto start = Clock::now();
    const auto deadline = start + deadlines.connect;
    auto fail = [&](RedisFailure kind, const std::string& what) {
        if (why != nullptr) *why = kind;
        return to_error(endpoint.redacted(), kind, what);
    };

    Connected connected = connect_endpoint(endpoint, deadline, deadlines.connect);
    if (!connected.fd) return fail(connected.failure, connected.what);
    std::unique_ptr<RedisConnection> connection(
        new RedisConnection(std::move(connected.fd), endpoint, deadlines, max_reply_bytes));

    // AUTH and SELECT go out together and share what is left of the connect deadline.
    std::vector<std::vector<std::string_view>> setup;
    if (!endpoint.password.empty() || !endpoint.user.empty()) {
        // A user without a password is a `nopass` ACL user, which accepts any password.
        if (endpoint.user.empty()) {
            setup.push_back({"AUTH", endpoint.password});
        } else {
            setup.push_back({"AUTH", endpoint.user, endpoint.password});
        }
    }
    const std::string db = std::to_string(endpoint.db);
    if (endpoint.db != 0) setup.push_back({"SELECT", db});
    if (setup.empty()) return connection;

    auto replies = connection->exchange(setup, start, deadlines.connect, deadlines.connect);
    if (!replies) {
        if (why != nullptr) *why = connection->failure_;
        return Error(replies.error().code(), without(replies.error().message(), endpoint.password));
    }
    for (std::size_t i = 0; i < replies->size(); ++i) {
        const RedisReply& reply = (*replies)[i];
        if (reply.is_error()) {
            const bool auth = setup[i][0] == "AUTH";
            return fail(RedisFailure::kAuth,
                        std::string(auth ? "AUTH" : "SELECT " + db) +
                            " refused: " + without(reply.text, endpoint.password));
        }
    }
    return connection;
}

Result<RedisReply> RedisConnection::command(const std::vector<std::string_view>& args) {
    TRY_ASSIGN(auto replies,
               exchange({args}, Clock::now(), deadlines_.first_byte, deadlines_.total));
    return std::move(replies.front());
}

Result<std::vector<RedisReply>> RedisConnection::pipeline(
    const std::vector<std::vector<std::string_view>>& commands, milliseconds total) {
    if (commands.empty()) return std::vector<RedisReply>();
    return exchange(commands, Clock::now(), deadlines_.first_byte, total);
}

Result<std::vector<RedisReply>> RedisConnection::exchange(
    const std::vector<std::vector<std::string_view>>& commands, Clock::time_point start,
    milliseconds first_byte_budget, milliseconds total_budget) {
    const auto fail = [&](RedisFailure kind, const std::string& what) -> Error {
        broken_ = true;
        failure_ = kind;
        return to_error(name_, kind, what);
    };
    if (broken_) return fail(RedisFailure::kIo, "the connection broke earlier");
    failure_ = RedisFailure::kNone;

    std::string request;
    for (const auto& args : commands) request += format_command(args);
    std::string_view unsent(request);
    std::vector<RedisReply> replies;
    replies.reserve(commands.size());
    bool any_byte = false;
    std::uint64_t received = 0;
    if (read_buffer_.empty()) read_buffer_.resize(kReadChunk);
    std::vector<char>& chunk = read_buffer_;
    // A large value takes longer to move than a small one: the deadlines grow with the bytes
    // sent, and the total one with the bytes received too, at the slowest rate taken for a link.
    // A server trickling bytes gains nothing by it.
    const auto first_byte = start + first_byte_budget + transfer_time(request.size());
    const auto total = [&] {
        return start + total_budget + transfer_time(request.size() + received);
    };
    std::optional<Clock::time_point> spin_until;

    // Sends and reads together: a server answering the first commands of a long pipeline must not
    // wait on a full socket buffer while kcache is still sending the last ones.
    while (replies.size() < commands.size()) {
        if (!unsent.empty()) {
            // Sent before any wait: a socket buffer almost always has room for a request.
            const ssize_t n =
                ::send(fd_.get(), unsent.data(), unsent.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
            if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                return fail(RedisFailure::kIo, "send: " + errno_text(errno));
            }
            if (n > 0) {
                unsent.remove_prefix(static_cast<std::size_t>(n));
                bytes_out_ += static_cast<std::uint64_t>(n);
            }
            // A server near by answers within microseconds of the request's last byte: that long
            // is waited for awake, since going to sleep and being woken costs as much again.
            if (unsent.empty() && deadlines_.busy_poll.count() > 0) {
                spin_until = Clock::now() + deadlines_.busy_poll;
            }
        }
        const auto deadline = any_byte ? total() : std::min(first_byte, total());
        short events = POLLIN;
        if (!unsent.empty()) events |= POLLOUT;
        const int revents =
            wait_for(fd_.get(), events, deadline, any_byte ? std::nullopt : spin_until);
        if (revents < 0) return fail(RedisFailure::kIo, "poll: " + errno_text(errno));
        if (revents == 0) {
            if (!any_byte && deadline == first_byte && first_byte < total()) {
                return fail(RedisFailure::kTimeout, "no reply within the first-byte timeout of " +
                                                        describe_ms(first_byte_budget));
            }
            return fail(RedisFailure::kTimeout,
                        "reply not complete within " + describe_ms(total_budget));
        }
        if ((revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
            const ssize_t n = ::recv(fd_.get(), chunk.data(), chunk.size(), MSG_DONTWAIT);
            if (n == 0) return fail(RedisFailure::kIo, "the server closed the connection");
            if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                return fail(RedisFailure::kIo, "recv: " + errno_text(errno));
            }
            if (n > 0) {
                any_byte = true;
                received += static_cast<std::uint64_t>(n);
                bytes_in_ += static_cast<std::uint64_t>(n);
                auto fed =
                    reader_.feed(std::string_view(chunk.data(), static_cast<std::size_t>(n)));
                // Over the bound is the value's fault, not the server's (redis_server_client).
                const auto unreadable = [&] {
                    return reader_.over_bound() ? RedisFailure::kTooLarge : RedisFailure::kProtocol;
                };
                if (!fed) return fail(unreadable(), fed.error().message());
                for (;;) {
                    auto next = reader_.next();
                    if (!next) return fail(unreadable(), next.error().message());
                    if (!next->has_value()) break;
                    if (replies.size() == commands.size()) {
                        return fail(RedisFailure::kProtocol, "a reply nothing asked for");
                    }
                    replies.push_back(std::move(**next));
                }
            }
        }
    }
    return replies;
}

}  // namespace kcache::store::remote
