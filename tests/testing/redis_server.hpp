// SPDX-License-Identifier: Apache-2.0
// Redis for tests: a real redis-server started on a free loopback port (and, if asked, a unix
// socket) in its own temporary directory, which tests stop, kill and restart on purpose; and the
// peers no real server plays: one that trickles its reply a byte at a time, one that never
// answers, and a loopback address whose connects are never completed.
//
// Nothing here connects anywhere but 127.0.0.1 or a unix socket in the server's directory.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kcache/result.hpp"
#include "util/unique_fd.hpp"

namespace kcache::fakes {

struct RedisServerOptions {
    // Also listen on `<directory>/redis.sock`.
    bool unix_socket = false;
    // `requirepass` for the default user; the harness's own client (cli(), set(), get()) uses it.
    std::string password;
    // More redis.conf lines, verbatim: "user reader on >pw ~* +get -set", "maxmemory 2mb",
    // "maxmemory-policy allkeys-lru".
    std::vector<std::string> config_lines;
};

// A reply as the harness's own small RESP client reads it: independent of the code under test,
// so that a test can check what that code wrote.
struct RespValue {
    char type = '_';   // '+', '-', ':', '$', '*', or '_' for a nil bulk or array
    std::string text;  // '+' and '-': the line; ':': the digits; '$': the bytes
    std::vector<RespValue> elements;
};

class RedisServer {
public:
    // Starts a server and waits (bounded) until it answers PING. The binary is
    // $KCACHE_TEST_REDIS_SERVER, else `redis-server` from PATH; redis-cli beside it or from PATH.
    static Result<std::unique_ptr<RedisServer>> start(RedisServerOptions options = {});

    // Whether a server can start here (tried once per process). A test skips when it cannot:
    //     if (!RedisServer::available()) GTEST_SKIP() << RedisServer::unavailable_reason();
    // With KCACHE_TEST_REQUIRE_REDIS=1 (CI) it reports true regardless, so that start() fails
    // the test with its reason instead of skipping it.
    static bool available();
    static std::string unavailable_reason();

    ~RedisServer();  // kills and reaps the server, removes its directory
    RedisServer(const RedisServer&) = delete;
    RedisServer& operator=(const RedisServer&) = delete;

    std::uint16_t port() const noexcept { return port_; }
    // `<directory>/redis.sock`; empty unless options.unix_socket.
    std::string unix_socket() const;
    // "redis://127.0.0.1:PORT"
    std::string url() const;
    const std::string& directory() const noexcept { return directory_; }
    pid_t pid() const noexcept { return pid_; }

    void stop();    // SIGSTOP: connections stay open and nothing answers
    void resume();  // SIGCONT
    void kill();    // SIGKILL and reap; restart() brings it back
    // Kills (if running) and starts again on the same port with the same configuration (and no
    // data: nothing is saved).
    Result<void> restart();

    // Runs redis-cli against the server (with the password, if any) and returns its stdout;
    // `input` is its stdin, for `-x`: cli({"-x", "SET", "k"}, bytes).
    std::string cli(const std::vector<std::string>& args, const std::string& input = {}) const;

    // The harness's own client, binary safe: one command, its reply (type '-' for an error).
    RespValue command(const std::vector<std::string>& args) const;
    // Plants `value` under `key` exactly (SET). False if the server did not say OK.
    bool set(const std::string& key, const std::string& value) const;
    // The value under `key`, nullopt for none.
    std::optional<std::string> get(const std::string& key) const;

private:
    RedisServer() = default;
    Result<void> launch();

    RedisServerOptions options_;
    std::string directory_;
    std::uint16_t port_ = 0;
    pid_t pid_ = -1;
};

// A peer that accepts connections on a loopback port and answers each request it reads with
// `reply`, written `chunk` bytes (one by default) every `interval`: a request's total deadline
// must not stretch with a trickle, and must allow a large reply sent at a steady rate.
class TricklingServer {
public:
    TricklingServer(std::string reply, std::chrono::milliseconds interval, std::size_t chunk = 1);
    ~TricklingServer();
    TricklingServer(const TricklingServer&) = delete;
    TricklingServer& operator=(const TricklingServer&) = delete;

    std::uint16_t port() const noexcept { return port_; }
    std::string url() const;
    // Connections accepted and bytes written so far.
    int accepted() const noexcept { return accepted_.load(); }
    std::int64_t bytes_written() const noexcept { return written_.load(); }

private:
    void serve();

    std::string reply_;
    std::chrono::milliseconds interval_;
    std::size_t chunk_;
    util::UniqueFd listener_;
    util::UniqueFd wake_read_, wake_write_;  // closing the write end stops the thread
    std::uint16_t port_ = 0;
    std::atomic<int> accepted_{0};
    std::atomic<std::int64_t> written_{0};
    std::thread thread_;
};

// A peer that accepts connections on a loopback port, reads what comes and never answers.
class SilentServer {
public:
    SilentServer();
    ~SilentServer();
    SilentServer(const SilentServer&) = delete;
    SilentServer& operator=(const SilentServer&) = delete;

    std::uint16_t port() const noexcept { return port_; }
    std::string url() const;
    int accepted() const noexcept { return accepted_.load(); }

private:
    void serve();

    util::UniqueFd listener_;
    util::UniqueFd wake_read_, wake_write_;
    std::uint16_t port_ = 0;
    std::atomic<int> accepted_{0};
    std::thread thread_;
};

// A loopback port where a connect is never completed: a listener that never accepts, its accept
// queue filled by the harness itself, so that the kernel drops every further SYN as it would
// for a blackholed address, without leaving the machine.
class BlackholeListener {
public:
    BlackholeListener();
    std::uint16_t port() const noexcept { return port_; }
    std::string url() const;
    // False if the queue could not be filled (the test should then skip: a connect might finish).
    bool ready() const noexcept { return ready_; }

private:
    util::UniqueFd listener_;
    std::vector<util::UniqueFd> fillers_;
    std::uint16_t port_ = 0;
    bool ready_ = false;
};

}  // namespace kcache::fakes
