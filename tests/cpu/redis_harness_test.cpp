// SPDX-License-Identifier: Apache-2.0
// The Redis test harness itself (tests/testing/redis_server.hpp): what the remote tier's tests
// rely on it to do.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "testing/redis_server.hpp"

namespace kcache::fakes {
namespace {

using namespace std::chrono_literals;

#define SKIP_WITHOUT_REDIS()                                   \
    do {                                                       \
        if (!RedisServer::available()) {                       \
            GTEST_SKIP() << RedisServer::unavailable_reason(); \
        }                                                      \
    } while (false)

util::UniqueFd connect_nonblocking(std::uint16_t port) {
    util::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(port);
    (void)::connect(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address);
    return fd;
}

TEST(RedisHarness, AStartedServerKeepsBinaryValuesAndAnswersRedisCli) {
    SKIP_WITHOUT_REDIS();
    RedisServerOptions options;
    options.unix_socket = true;
    auto server = RedisServer::start(options);
    ASSERT_TRUE(server.ok()) << server.error().message();
    const std::string value("a\0b\r\n\xff", 6);
    ASSERT_TRUE((*server)->set("k", value));
    EXPECT_EQ((*server)->get("k"), value);
    EXPECT_EQ((*server)->get("absent"), std::nullopt);
    EXPECT_EQ((*server)->cli({"PING"}), "PONG\n");
    EXPECT_EQ((*server)->cli({"-x", "SET", "planted"}, value), "OK\n");
    EXPECT_EQ((*server)->get("planted"), value);
    EXPECT_EQ((*server)->url(), "redis://127.0.0.1:" + std::to_string((*server)->port()));
    EXPECT_EQ(::access((*server)->unix_socket().c_str(), F_OK), 0);
}

TEST(RedisHarness, APasswordAndAclUsersAreConfigured) {
    SKIP_WITHOUT_REDIS();
    RedisServerOptions options;
    options.password = "s3cret";
    options.config_lines = {"user reader on >pw ~* +get +auth"};
    auto server = RedisServer::start(options);
    ASSERT_TRUE(server.ok()) << server.error().message();
    ASSERT_TRUE((*server)->set("k", "v"));  // the harness authenticates itself
    EXPECT_EQ((*server)->cli({"--user", "reader", "--pass", "pw", "GET", "k"}), "v\n");
}

TEST(RedisHarness, AStoppedServerAnswersAfterResumeAndAKilledOneAfterRestart) {
    SKIP_WITHOUT_REDIS();
    auto started = RedisServer::start();
    ASSERT_TRUE(started.ok()) << started.error().message();
    RedisServer& server = **started;
    const auto port = server.port();
    server.stop();
    {
        auto fd = connect_nonblocking(port);  // the kernel completes it; nobody answers
        pollfd pfd{fd.get(), POLLOUT, 0};
        ASSERT_EQ(::poll(&pfd, 1, 2000), 1);
        ASSERT_EQ(::send(fd.get(), "PING\r\n", 6, MSG_NOSIGNAL), 6);
        pfd = {fd.get(), POLLIN, 0};
        EXPECT_EQ(::poll(&pfd, 1, 200), 0);
    }
    server.resume();
    EXPECT_TRUE(server.set("k", "v"));
    server.kill();
    EXPECT_EQ(server.command({"PING"}).type, '!');
    ASSERT_TRUE(server.restart().ok());
    EXPECT_EQ(server.port(), port);
    EXPECT_EQ(server.command({"PING"}).text, "PONG");
    EXPECT_EQ(server.get("k"), std::nullopt);  // nothing saved
}

TEST(RedisHarness, ATricklingServerWritesOneByteAtATime) {
    TricklingServer server("+OK\r\n", 20ms);
    auto fd = connect_nonblocking(server.port());
    pollfd pfd{fd.get(), POLLOUT, 0};
    ASSERT_EQ(::poll(&pfd, 1, 2000), 1);
    ASSERT_EQ(::send(fd.get(), "*1\r\n$4\r\nPING\r\n", 14, MSG_NOSIGNAL), 14);
    std::string got;
    int reads = 0;
    while (got.size() < 5) {
        pfd = {fd.get(), POLLIN, 0};
        ASSERT_EQ(::poll(&pfd, 1, 2000), 1);
        char byte[16];
        const ssize_t n = ::recv(fd.get(), byte, sizeof byte, 0);
        ASSERT_GT(n, 0);
        got.append(byte, static_cast<std::size_t>(n));
        ++reads;
    }
    EXPECT_EQ(got, "+OK\r\n");
    EXPECT_GE(reads, 3);  // trickled, not sent at once
    EXPECT_EQ(server.accepted(), 1);
}

TEST(RedisHarness, ASilentServerAcceptsAndNeverAnswers) {
    SilentServer server;
    auto fd = connect_nonblocking(server.port());
    pollfd pfd{fd.get(), POLLOUT, 0};
    ASSERT_EQ(::poll(&pfd, 1, 2000), 1);
    ASSERT_EQ(::send(fd.get(), "*1\r\n$4\r\nPING\r\n", 14, MSG_NOSIGNAL), 14);
    pfd = {fd.get(), POLLIN, 0};
    EXPECT_EQ(::poll(&pfd, 1, 200), 0);
    EXPECT_EQ(server.accepted(), 1);
}

TEST(RedisHarness, ABlackholedPortNeverCompletesAConnect) {
    BlackholeListener blackhole;
    if (!blackhole.ready()) GTEST_SKIP() << "this kernel completes connects to a full listener";
    auto fd = connect_nonblocking(blackhole.port());
    pollfd pfd{fd.get(), POLLOUT, 0};
    EXPECT_EQ(::poll(&pfd, 1, 300), 0);
}

}  // namespace
}  // namespace kcache::fakes
