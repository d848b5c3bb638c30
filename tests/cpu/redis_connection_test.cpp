// SPDX-License-Identifier: Apache-2.0
// RedisConnection against a real redis-server (tests/testing/redis_server.hpp) and against peers
// that misbehave on purpose: its deadlines hold, its failures say what kind they are, and a
// password never shows in a message.
#include "store/remote/redis_connection.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "testing/redis_server.hpp"

namespace kcache::store::remote {
namespace {

using namespace std::chrono_literals;
using fakes::RedisServer;
using fakes::RedisServerOptions;
using Clock = std::chrono::steady_clock;

#define SKIP_WITHOUT_REDIS()                                   \
    do {                                                       \
        if (!RedisServer::available()) {                       \
            GTEST_SKIP() << RedisServer::unavailable_reason(); \
        }                                                      \
    } while (false)

// Timing bounds are generous: the machine running the tests is shared and busy. What they
// separate is "about the deadline" from "a multiple of it".
constexpr auto kSlack = 1500ms;
constexpr std::size_t kMaxReply = 64 << 20;

RedisEndpoint tcp(std::uint16_t port) {
    RedisEndpoint endpoint;
    endpoint.host = "127.0.0.1";
    endpoint.port = port;
    return endpoint;
}

Deadlines deadlines(std::chrono::milliseconds connect, std::chrono::milliseconds first_byte,
                    std::chrono::milliseconds total) {
    Deadlines out;
    out.connect = connect;
    out.first_byte = first_byte;
    out.total = total;
    return out;
}

RedisServerOptions with_unix_socket() {
    RedisServerOptions options;
    options.unix_socket = true;
    return options;
}

RedisServerOptions with_password(std::string password, std::vector<std::string> lines = {}) {
    RedisServerOptions options;
    options.password = std::move(password);
    options.config_lines = std::move(lines);
    return options;
}

std::unique_ptr<RedisServer> start_server(RedisServerOptions options = {}) {
    auto server = RedisServer::start(std::move(options));
    EXPECT_TRUE(server.ok()) << server.error().message();
    return server.ok() ? std::move(*server) : nullptr;
}

std::unique_ptr<RedisConnection> open_or_fail(const RedisEndpoint& endpoint,
                                              Deadlines deadlines = {},
                                              std::size_t max_reply = kMaxReply) {
    auto connection = RedisConnection::open(endpoint, deadlines, max_reply);
    EXPECT_TRUE(connection.ok()) << connection.error().message();
    return connection.ok() ? std::move(*connection) : nullptr;
}

std::chrono::milliseconds since(Clock::time_point start) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
}

TEST(RedisConnection, BinaryValuesRoundTripIncludingLargeOnes) {
    SKIP_WITHOUT_REDIS();
    auto server = start_server();
    ASSERT_TRUE(server);
    auto connection = open_or_fail(tcp(server->port()), deadlines(100ms, 10s, 10s));
    ASSERT_TRUE(connection);

    auto pong = connection->command({"PING"});
    ASSERT_TRUE(pong.ok()) << pong.error().message();
    EXPECT_EQ(pong->type, RedisReply::Type::kStatus);
    EXPECT_EQ(pong->text, "PONG");

    const std::string small("\0a\r\n\0$-1\r\n", 10);
    std::string large(10 << 20, '\0');
    for (std::size_t i = 0; i < large.size(); i += 4099) large[i] = static_cast<char>(i);
    for (const std::string* value : {&small, static_cast<const std::string*>(&large)}) {
        auto set = connection->command({"SET", "k", *value});
        ASSERT_TRUE(set.ok()) << set.error().message();
        EXPECT_EQ(set->text, "OK");
        EXPECT_EQ(server->get("k"), *value);  // as the harness's own client reads it
        auto get = connection->command({"GET", "k"});
        ASSERT_TRUE(get.ok()) << get.error().message();
        EXPECT_EQ(get->type, RedisReply::Type::kString);
        EXPECT_TRUE(get->text == *value);
    }
    auto missing = connection->command({"GET", "absent"});
    ASSERT_TRUE(missing.ok());
    EXPECT_TRUE(missing->is_nil());
    EXPECT_GT(connection->bytes_out(), large.size());  // one SET of it
    EXPECT_LT(connection->bytes_out(), large.size() + 4096);
    EXPECT_GT(connection->bytes_in(), large.size());  // one GET of it
    EXPECT_EQ(connection->failure(), RedisFailure::kNone);
}

TEST(RedisConnection, SetNxLeavesAnExistingValueAlone) {
    SKIP_WITHOUT_REDIS();
    auto server = start_server();
    ASSERT_TRUE(server);
    auto connection = open_or_fail(tcp(server->port()));
    ASSERT_TRUE(connection);
    auto first = connection->command({"SET", "k", "first", "NX"});
    ASSERT_TRUE(first.ok());
    EXPECT_EQ(first->text, "OK");
    auto second = connection->command({"SET", "k", "second", "NX"});
    ASSERT_TRUE(second.ok());
    EXPECT_TRUE(second->is_nil());
    EXPECT_EQ(server->get("k"), "first");
}

TEST(RedisConnection, APipelineOfAHundredCommandsAnswersInOrder) {
    SKIP_WITHOUT_REDIS();
    auto server = start_server();
    ASSERT_TRUE(server);
    auto connection = open_or_fail(tcp(server->port()));
    ASSERT_TRUE(connection);
    std::vector<std::string> keys, values;
    for (int i = 0; i < 100; ++i) {
        keys.push_back("key" + std::to_string(i));
        values.push_back(std::string(1000 + i, static_cast<char>('a' + i % 26)));
    }
    std::vector<std::vector<std::string_view>> sets, gets;
    for (int i = 0; i < 100; ++i) {
        sets.push_back({"SET", keys[i], values[i]});
        gets.push_back({"GET", keys[i]});
    }
    auto set = connection->pipeline(sets, 5s);
    ASSERT_TRUE(set.ok()) << set.error().message();
    ASSERT_EQ(set->size(), 100u);
    for (const auto& reply : *set) EXPECT_EQ(reply.text, "OK");
    auto got = connection->pipeline(gets, 5s);
    ASSERT_TRUE(got.ok()) << got.error().message();
    ASSERT_EQ(got->size(), 100u);
    for (int i = 0; i < 100; ++i) EXPECT_EQ((*got)[i].text, values[i]) << i;
}

TEST(RedisConnection, AUnixSocketServesAsTcpDoes) {
    SKIP_WITHOUT_REDIS();
    auto server = start_server(with_unix_socket());
    ASSERT_TRUE(server);
    RedisEndpoint endpoint;
    endpoint.transport = RedisEndpoint::Transport::kUnix;
    endpoint.socket_path = server->unix_socket();
    endpoint.db = 3;
    auto connection = open_or_fail(endpoint);
    ASSERT_TRUE(connection);
    ASSERT_TRUE(connection->command({"SET", "k", "in db 3"}).ok());
    EXPECT_EQ(server->get("k"), std::nullopt);  // the harness reads db 0
    EXPECT_EQ(server->cli({"-n", "3", "GET", "k"}), "in db 3\n");
}

TEST(RedisConnection, APasswordAndAnAclUserAuthenticate) {
    SKIP_WITHOUT_REDIS();
    auto server =
        start_server(with_password("admin-pw", {"user reader on >reader-pw ~* +get +ping"}));
    ASSERT_TRUE(server);
    ASSERT_TRUE(server->set("k", "v"));

    RedisEndpoint admin = tcp(server->port());
    admin.password = "admin-pw";
    auto as_admin = open_or_fail(admin);
    ASSERT_TRUE(as_admin);
    EXPECT_EQ(as_admin->command({"SET", "k", "w"})->text, "OK");

    RedisEndpoint reader = tcp(server->port());
    reader.user = "reader";
    reader.password = "reader-pw";
    auto as_reader = open_or_fail(reader);
    ASSERT_TRUE(as_reader);
    EXPECT_EQ(as_reader->command({"GET", "k"})->text, "w");
    // A refused command is a reply, and the connection goes on.
    auto refused = as_reader->command({"SET", "k", "x"});
    ASSERT_TRUE(refused.ok()) << refused.error().message();
    EXPECT_TRUE(refused->is_error());
    EXPECT_EQ(refused->error_code(), "NOPERM");
    EXPECT_FALSE(as_reader->broken());
    EXPECT_EQ(as_reader->command({"PING"})->text, "PONG");

    auto unauthenticated = open_or_fail(tcp(server->port()));
    ASSERT_TRUE(unauthenticated);
    auto noauth = unauthenticated->command({"GET", "k"});
    ASSERT_TRUE(noauth.ok());
    EXPECT_EQ(noauth->error_code(), "NOAUTH");
}

TEST(RedisConnection, AWrongPasswordIsAnAuthFailureThatNeverNamesThePassword) {
    SKIP_WITHOUT_REDIS();
    auto server = start_server(with_password("right-pw", {"user reader on >reader-pw ~* +get"}));
    ASSERT_TRUE(server);
    for (const std::string user : {"", "reader", "nobody"}) {
        SCOPED_TRACE(user);
        RedisEndpoint endpoint = tcp(server->port());
        endpoint.user = user;
        endpoint.password = "Wrong-Pa55word";
        RedisFailure why = RedisFailure::kNone;
        auto connection = RedisConnection::open(endpoint, {}, kMaxReply, &why);
        ASSERT_FALSE(connection.ok());
        EXPECT_EQ(why, RedisFailure::kAuth);
        const std::string& message = connection.error().message();
        EXPECT_EQ(message.find("Wrong-Pa55word"), std::string::npos) << message;
        EXPECT_NE(message.find(std::to_string(server->port())), std::string::npos) << message;
        EXPECT_NE(message.find("AUTH"), std::string::npos) << message;
    }
}

TEST(RedisConnection, ASelectOfADatabaseThatDoesNotExistIsAnAuthFailure) {
    SKIP_WITHOUT_REDIS();
    auto server = start_server(with_password("", {"databases 4"}));
    ASSERT_TRUE(server);
    RedisEndpoint endpoint = tcp(server->port());
    endpoint.db = 9;
    RedisFailure why = RedisFailure::kNone;
    auto connection = RedisConnection::open(endpoint, {}, kMaxReply, &why);
    ASSERT_FALSE(connection.ok());
    EXPECT_EQ(why, RedisFailure::kAuth);
    EXPECT_NE(connection.error().message().find("SELECT 9"), std::string::npos);
}

TEST(RedisConnection, ARefusedPortFailsToConnectAtOnce) {
    // A port with no listener: bound by a server started and killed, so nothing else is there.
    SKIP_WITHOUT_REDIS();
    auto server = start_server();
    ASSERT_TRUE(server);
    const auto port = server->port();
    server->kill();
    const auto start = Clock::now();
    RedisFailure why = RedisFailure::kNone;
    auto connection = RedisConnection::open(tcp(port), deadlines(5s, 1s, 1s), kMaxReply, &why);
    ASSERT_FALSE(connection.ok());
    EXPECT_EQ(why, RedisFailure::kConnect);
    EXPECT_LT(since(start), 5s);  // refused, not waited out
    EXPECT_NE(connection.error().message().find("127.0.0.1:" + std::to_string(port)),
              std::string::npos);
}

TEST(RedisConnection, AMissingUnixSocketFailsToConnect) {
    RedisEndpoint endpoint;
    endpoint.transport = RedisEndpoint::Transport::kUnix;
    endpoint.socket_path = "/nonexistent/kcache-test.sock";
    RedisFailure why = RedisFailure::kNone;
    auto connection = RedisConnection::open(endpoint, {}, kMaxReply, &why);
    ASSERT_FALSE(connection.ok());
    EXPECT_EQ(why, RedisFailure::kConnect);
}

TEST(RedisConnection, ABlackholedAddressTimesOutConnecting) {
    fakes::BlackholeListener blackhole;
    if (!blackhole.ready()) GTEST_SKIP() << "this kernel completes connects to a full listener";
    const auto start = Clock::now();
    RedisFailure why = RedisFailure::kNone;
    auto connection =
        RedisConnection::open(tcp(blackhole.port()), deadlines(200ms, 1s, 1s), kMaxReply, &why);
    ASSERT_FALSE(connection.ok());
    EXPECT_EQ(why, RedisFailure::kTimeout);
    EXPECT_GE(since(start), 200ms);
    EXPECT_LT(since(start), 200ms + kSlack);
}

TEST(RedisConnection, AStoppedServerTimesOutWithinTheDeadline) {
    SKIP_WITHOUT_REDIS();
    auto server = start_server();
    ASSERT_TRUE(server);
    auto connection = open_or_fail(tcp(server->port()), deadlines(100ms, 300ms, 300ms));
    ASSERT_TRUE(connection);
    ASSERT_TRUE(connection->command({"PING"}).ok());
    server->stop();
    const auto start = Clock::now();
    auto reply = connection->command({"GET", "k"});
    const auto took = since(start);
    server->resume();
    ASSERT_FALSE(reply.ok());
    EXPECT_EQ(connection->failure(), RedisFailure::kTimeout);
    EXPECT_TRUE(connection->broken());
    EXPECT_GE(took, 300ms);
    EXPECT_LT(took, 300ms + kSlack);
    // A late reply must not answer a later request: the connection refuses to go on.
    auto later = connection->command({"PING"});
    EXPECT_FALSE(later.ok());
}

TEST(RedisConnection, AStoppedServerTimesOutConnectingWithinTheConnectDeadline) {
    // The kernel completes the connect; the AUTH then goes unanswered.
    SKIP_WITHOUT_REDIS();
    auto server = start_server(with_password("pw"));
    ASSERT_TRUE(server);
    server->stop();
    RedisEndpoint endpoint = tcp(server->port());
    endpoint.password = "pw";
    const auto start = Clock::now();
    RedisFailure why = RedisFailure::kNone;
    auto connection = RedisConnection::open(endpoint, deadlines(200ms, 1s, 1s), kMaxReply, &why);
    const auto took = since(start);
    server->resume();
    ASSERT_FALSE(connection.ok());
    EXPECT_EQ(why, RedisFailure::kTimeout);
    EXPECT_LT(took, 200ms + kSlack);
}

TEST(RedisConnection, ATricklingServerCannotStretchATimeout) {
    // A byte every 100 ms of a reply hundreds of bytes long: each read() is quick, only a total
    // deadline ends it.
    fakes::TricklingServer server("$400\r\n" + std::string(400, 'x') + "\r\n", 100ms);
    auto connection = open_or_fail(tcp(server.port()), deadlines(100ms, 250ms, 250ms));
    ASSERT_TRUE(connection);
    const auto start = Clock::now();
    auto reply = connection->command({"GET", "k"});
    const auto took = since(start);
    ASSERT_FALSE(reply.ok());
    EXPECT_EQ(connection->failure(), RedisFailure::kTimeout);
    EXPECT_GE(took, 250ms);
    EXPECT_LT(took, 250ms + kSlack);
    EXPECT_GT(connection->bytes_in(), 0u);  // it did trickle
    EXPECT_LT(connection->bytes_in(), 400u);
}

TEST(RedisConnection, ATricklingServerCannotStretchAPipelinesDeadline) {
    fakes::TricklingServer server("+OK\r\n", 30ms);
    auto connection = open_or_fail(tcp(server.port()), deadlines(100ms, 1s, 1s));
    ASSERT_TRUE(connection);
    const auto start = Clock::now();
    auto replies = connection->pipeline({{"PING"}, {"PING"}, {"PING"}, {"PING"}, {"PING"}}, 300ms);
    const auto took = since(start);
    // The five requests reach the peer together and it trickles one reply for them: the other
    // four never come, and the pipeline's own deadline, not the connection's, ends the wait.
    ASSERT_FALSE(replies.ok());
    EXPECT_EQ(connection->failure(), RedisFailure::kTimeout);
    EXPECT_LT(took, 300ms + kSlack);
}

TEST(RedisConnection, ASilentServerTimesOutAtTheFirstByteDeadline) {
    fakes::SilentServer server;
    auto connection = open_or_fail(tcp(server.port()), deadlines(100ms, 200ms, 5s));
    ASSERT_TRUE(connection);
    const auto start = Clock::now();
    auto reply = connection->command({"PING"});
    const auto took = since(start);
    ASSERT_FALSE(reply.ok());
    EXPECT_EQ(connection->failure(), RedisFailure::kTimeout);
    EXPECT_NE(reply.error().message().find("first-byte"), std::string::npos);
    EXPECT_GE(took, 200ms);
    EXPECT_LT(took, 200ms + kSlack);  // not the total deadline
}

TEST(RedisConnection, AHostNameIsResolvedWithinTheConnectDeadline) {
    // A name, not a numeric address: resolved on a thread of its own (a name server that never
    // answers is tests/fleet/netns_fleet.sh's case).
    auto server = start_server();
    ASSERT_TRUE(server);
    RedisEndpoint endpoint = tcp(server->port());
    endpoint.host = "localhost";
    auto connection = RedisConnection::open(endpoint, deadlines(2s, 1s, 1s), kMaxReply);
    if (!connection.ok() && connection.error().message().find("refused") != std::string::npos) {
        GTEST_SKIP() << "localhost is not 127.0.0.1 here: " << connection.error().message();
    }
    ASSERT_TRUE(connection.ok()) << connection.error().message();
    auto pong = (*connection)->command({"PING"});
    ASSERT_TRUE(pong.ok()) << pong.error().message();
    EXPECT_EQ(pong->text, "PONG");
}

TEST(RedisConnection, ALargeReplyAtASteadyRateHasMoreTimeThanTheTimeout) {
    // 4 MiB in 64 KiB pieces every 5 ms: about 330 ms, longer than the timeout but well within
    // the time 4 MiB is allowed to take (0.5 s more at the slowest rate taken for a link).
    const std::string value(std::size_t{4} << 20, 'v');
    fakes::TricklingServer server("$" + std::to_string(value.size()) + "\r\n" + value + "\r\n", 5ms,
                                  std::size_t{64} << 10);
    auto connection = open_or_fail(tcp(server.port()), deadlines(100ms, 250ms, 250ms));
    ASSERT_TRUE(connection);
    auto reply = connection->command({"GET", "k"});
    ASSERT_TRUE(reply.ok()) << reply.error().message();
    EXPECT_EQ(reply->text.size(), value.size());
}

TEST(RedisConnection, ALargeRequestHasMoreTimeForItsFirstByte) {
    // 4 MiB sent to a peer that never answers: the first-byte deadline is the timeout plus the
    // time 4 MiB is allowed to take (0.5 s), not the timeout alone.
    fakes::SilentServer server;
    auto connection = open_or_fail(tcp(server.port()), deadlines(100ms, 100ms, 100ms));
    ASSERT_TRUE(connection);
    const std::string value(std::size_t{4} << 20, 'v');
    const auto start = Clock::now();
    auto reply = connection->command({"SET", "k", value});
    const auto took = since(start);
    ASSERT_FALSE(reply.ok());
    EXPECT_EQ(connection->failure(), RedisFailure::kTimeout);
    EXPECT_GE(took, 550ms);
    EXPECT_LT(took, 600ms + kSlack);
}

TEST(RedisConnection, BusyPollingServesRepliesAndKeepsEveryDeadline) {
    auto server = start_server();
    ASSERT_TRUE(server);
    Deadlines polling = deadlines(100ms, 1s, 1s);
    polling.busy_poll = 2ms;
    auto connection = open_or_fail(tcp(server->port()), polling);
    ASSERT_TRUE(connection);
    for (int i = 0; i < 50; ++i) {
        const std::string value = "value-" + std::to_string(i);
        auto set = connection->command({"SET", "k" + std::to_string(i), value});
        ASSERT_TRUE(set.ok()) << set.error().message();
        auto got = connection->command({"GET", "k" + std::to_string(i)});
        ASSERT_TRUE(got.ok()) << got.error().message();
        EXPECT_EQ(got->text, value);
    }
    // A peer that never answers still times out at the first-byte deadline, spin or none.
    fakes::SilentServer silent;
    Deadlines short_wait = deadlines(100ms, 150ms, 5s);
    short_wait.busy_poll = 10ms;
    auto quiet = open_or_fail(tcp(silent.port()), short_wait);
    ASSERT_TRUE(quiet);
    const auto start = Clock::now();
    ASSERT_FALSE(quiet->command({"PING"}).ok());
    EXPECT_EQ(quiet->failure(), RedisFailure::kTimeout);
    EXPECT_GE(since(start), 150ms);
    EXPECT_LT(since(start), 150ms + kSlack);
}

TEST(RedisConnection, AServerKilledMidConnectionBreaksIt) {
    SKIP_WITHOUT_REDIS();
    auto server = start_server();
    ASSERT_TRUE(server);
    auto connection = open_or_fail(tcp(server->port()));
    ASSERT_TRUE(connection);
    ASSERT_TRUE(connection->command({"PING"}).ok());
    server->kill();
    auto reply = connection->command({"PING"});
    ASSERT_FALSE(reply.ok());
    EXPECT_EQ(connection->failure(), RedisFailure::kIo);
    EXPECT_TRUE(connection->broken());
    // A restarted server needs a new connection; the broken one stays broken.
    ASSERT_TRUE(server->restart().ok());
    EXPECT_FALSE(connection->command({"PING"}).ok());
    auto fresh = open_or_fail(tcp(server->port()));
    ASSERT_TRUE(fresh);
    EXPECT_TRUE(fresh->command({"PING"}).ok());
}

TEST(RedisConnection, AReplyOverTheBoundIsATooLargeFailure) {
    SKIP_WITHOUT_REDIS();
    auto server = start_server();
    ASSERT_TRUE(server);
    ASSERT_TRUE(server->set("big", std::string(2 << 20, 'b')));
    auto connection = open_or_fail(tcp(server->port()), deadlines(100ms, 5s, 5s), 1 << 20);
    ASSERT_TRUE(connection);
    auto reply = connection->command({"GET", "big"});
    ASSERT_FALSE(reply.ok());
    EXPECT_EQ(connection->failure(), RedisFailure::kTooLarge)
        << "the value's fault, not the server's";
    EXPECT_EQ(reply.error().code(), Errc::kCorruptEntry);
    EXPECT_TRUE(connection->broken());
    EXPECT_LE(connection->bytes_in(), (1u << 20) + 2 * 64 * 1024);  // stopped reading at the bound
}

TEST(RedisConnection, BytesThatAreNotRespAreAProtocolFailure) {
    fakes::TricklingServer server("HTTP/1.1 400 Bad Request\r\n\r\n", 0ms);
    auto connection = open_or_fail(tcp(server.port()));
    ASSERT_TRUE(connection);
    auto reply = connection->command({"PING"});
    ASSERT_FALSE(reply.ok());
    EXPECT_EQ(connection->failure(), RedisFailure::kProtocol);
    EXPECT_TRUE(connection->broken());
}

TEST(RedisConnection, FailureNamesAreDistinct) {
    const RedisFailure all[] = {RedisFailure::kNone,     RedisFailure::kConnect,
                                RedisFailure::kTimeout,  RedisFailure::kIo,
                                RedisFailure::kProtocol, RedisFailure::kAuth};
    std::set<std::string> names;
    for (RedisFailure failure : all) names.insert(redis_failure_name(failure));
    EXPECT_EQ(names.size(), std::size(all));
}

}  // namespace
}  // namespace kcache::store::remote
