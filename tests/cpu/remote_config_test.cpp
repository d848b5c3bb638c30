// SPDX-License-Identifier: Apache-2.0
// store::remote: the `remote` setting (URLs, attributes, shards), its errors and its redaction.
#include "store/remote/remote_config.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kcache::store::remote {
namespace {

using std::chrono::milliseconds;
using Transport = RedisEndpoint::Transport;

std::vector<RemoteBackendConfig> backends_of(std::string_view text) {
    auto parsed = parse_remote_setting(text);
    EXPECT_TRUE(parsed.ok()) << text << ": " << parsed.error().describe();
    return parsed.ok() ? *parsed : std::vector<RemoteBackendConfig>{};
}

RemoteBackendConfig backend_of(std::string_view text) {
    auto backends = backends_of(text);
    EXPECT_EQ(backends.size(), 1u) << text;
    return backends.empty() ? RemoteBackendConfig{} : backends.front();
}

RedisEndpoint endpoint_of(std::string_view text) {
    const RemoteBackendConfig backend = backend_of(text);
    EXPECT_EQ(backend.shards.size(), 1u) << text;
    return backend.shards.empty() ? RedisEndpoint{} : backend.shards.front().endpoint;
}

// The message of the error the text must give.
std::string error_of(std::string_view text) {
    auto parsed = parse_remote_setting(text);
    EXPECT_FALSE(parsed.ok()) << text << " parsed";
    if (parsed.ok()) return {};
    EXPECT_EQ(parsed.error().code(), Errc::kInvalidArgument) << text;
    return parsed.error().message();
}

void expect_error(std::string_view text, std::string_view says) {
    const std::string message = error_of(text);
    EXPECT_NE(message.find(says), std::string::npos)
        << text << " gave \"" << message << "\", not saying \"" << says << "\"";
    EXPECT_NE(message.find("remote backend '"), std::string::npos) << message;
}

TEST(RemoteConfig, APlainUrlTakesEveryDefault) {
    const RemoteBackendConfig backend = backend_of("redis://cache.internal");
    ASSERT_EQ(backend.shards.size(), 1u);
    const Shard& shard = backend.shards.front();
    EXPECT_EQ(shard.name, "");
    EXPECT_EQ(shard.weight, 1u);
    EXPECT_EQ(shard.endpoint.transport, Transport::kTcp);
    EXPECT_EQ(shard.endpoint.host, "cache.internal");
    EXPECT_EQ(shard.endpoint.port, 6379);
    EXPECT_EQ(shard.endpoint.db, 0);
    EXPECT_EQ(shard.endpoint.user, "");
    EXPECT_EQ(shard.endpoint.password, "");
    EXPECT_EQ(backend.connect_timeout, milliseconds(100));
    EXPECT_EQ(backend.timeout, milliseconds(1000));
    EXPECT_FALSE(backend.first_byte_timeout.has_value());
    EXPECT_FALSE(backend.read_only);
    EXPECT_EQ(backend.prefix, "kcache");
    EXPECT_EQ(backend.password_file, "");
    EXPECT_EQ(backend.max_value_bytes, std::uint64_t{64} << 20);
    EXPECT_EQ(backend.sign_key_file, "");
    EXPECT_TRUE(backend.verify_key_files.empty());
    EXPECT_FALSE(backend.require_signature);
}

TEST(RemoteConfig, AnEmptyOrBlankSettingIsNoBackend) {
    for (const char* text : {"", " ", " \t\n\r "}) {
        auto parsed = parse_remote_setting(text);
        ASSERT_TRUE(parsed.ok()) << parsed.error().describe();
        EXPECT_TRUE(parsed->empty());
    }
}

TEST(RemoteConfig, PortAndDbAreRead) {
    const RedisEndpoint endpoint = endpoint_of("redis://10.0.0.7:6380/3");
    EXPECT_EQ(endpoint.host, "10.0.0.7");
    EXPECT_EQ(endpoint.port, 6380);
    EXPECT_EQ(endpoint.db, 3);
    EXPECT_EQ(endpoint_of("redis://cache/15").db, 15);
    EXPECT_EQ(endpoint_of("redis://cache:1").port, 1);
    EXPECT_EQ(endpoint_of("redis://cache:65535/").port, 65535);
    EXPECT_EQ(endpoint_of("REDIS://cache").host, "cache");
}

TEST(RemoteConfig, UserAndPasswordArePercentDecoded) {
    const RedisEndpoint endpoint = endpoint_of("redis://re%61der:p%40ss%3Aw%2F0rd@cache:7000");
    EXPECT_EQ(endpoint.user, "reader");
    EXPECT_EQ(endpoint.password, "p@ss:w/0rd");
    EXPECT_EQ(endpoint.host, "cache");
    EXPECT_EQ(endpoint.port, 7000);

    const RedisEndpoint user_only = endpoint_of("redis://alice@cache");
    EXPECT_EQ(user_only.user, "alice");
    EXPECT_EQ(user_only.password, "");

    // Redis before 6: a password for the default user.
    const RedisEndpoint password_only = endpoint_of("redis://:s3cret@cache");
    EXPECT_EQ(password_only.user, "");
    EXPECT_EQ(password_only.password, "s3cret");
}

// The userinfo ends at the last '@', so a password's '/' and '@' need no escape.
TEST(RemoteConfig, APasswordMayHoldSlashesAndAtSigns) {
    const RedisEndpoint endpoint = endpoint_of("redis://bob:a/b@c:d@cache/2");
    EXPECT_EQ(endpoint.user, "bob");
    EXPECT_EQ(endpoint.password, "a/b@c:d");
    EXPECT_EQ(endpoint.host, "cache");
    EXPECT_EQ(endpoint.db, 2);
}

TEST(RemoteConfig, AnIpv6AddressIsWrittenInBrackets) {
    const RedisEndpoint loopback = endpoint_of("redis://[::1]:7001/4");
    EXPECT_EQ(loopback.host, "::1");
    EXPECT_EQ(loopback.port, 7001);
    EXPECT_EQ(loopback.db, 4);
    EXPECT_EQ(loopback.redacted(), "redis://[::1]:7001/4");
    const RedisEndpoint plain = endpoint_of("redis://u:pw@[fd00::a:5]");
    EXPECT_EQ(plain.host, "fd00::a:5");
    EXPECT_EQ(plain.port, 6379);
    EXPECT_EQ(plain.password, "pw");
}

TEST(RemoteConfig, AUnixSocketIsReadInBothUrlForms) {
    const RedisEndpoint short_form = endpoint_of("redis+unix:/run/redis/redis.sock");
    EXPECT_EQ(short_form.transport, Transport::kUnix);
    EXPECT_EQ(short_form.socket_path, "/run/redis/redis.sock");
    EXPECT_EQ(short_form.db, 0);
    EXPECT_EQ(endpoint_of("redis+unix:///run/redis/redis.sock"), short_form);

    const RedisEndpoint with_db = endpoint_of("redis+unix:/tmp/r.sock?db=5|timeout=250ms");
    EXPECT_EQ(with_db.socket_path, "/tmp/r.sock");
    EXPECT_EQ(with_db.db, 5);
    EXPECT_EQ(with_db.redacted(), "redis+unix:/tmp/r.sock?db=5");
    EXPECT_EQ(endpoint_of("redis+unix:///tmp/r.sock?db=5"), with_db);
}

TEST(RemoteConfig, BackendsAreSeparatedByAnyWhitespaceAndKeepTheirOrder) {
    const auto backends =
        backends_of("  redis://first  \t redis+unix:/tmp/second.sock\nredis://third|read-only\r\n");
    ASSERT_EQ(backends.size(), 3u);
    EXPECT_EQ(backends[0].shards.at(0).endpoint.host, "first");
    EXPECT_FALSE(backends[0].read_only);
    EXPECT_EQ(backends[1].shards.at(0).endpoint.socket_path, "/tmp/second.sock");
    EXPECT_EQ(backends[2].shards.at(0).endpoint.host, "third");
    EXPECT_TRUE(backends[2].read_only);
}

TEST(RemoteConfig, EveryAttributeIsRead) {
    const RemoteBackendConfig backend = backend_of(
        "redis://cache|connect-timeout=250ms|timeout=2s|first-byte-timeout=500|read-only"
        "|prefix=team-a|password-file=/etc/kcache/password|max-size=16Mi"
        "|sign-key=/etc/kcache/sign.pem|verify-key=/k/old.pem|verify-key=/k/new.pem"
        "|require-signature");
    EXPECT_EQ(backend.connect_timeout, milliseconds(250));
    EXPECT_EQ(backend.timeout, milliseconds(2000));
    EXPECT_EQ(backend.first_byte_timeout, milliseconds(500));
    EXPECT_TRUE(backend.read_only);
    EXPECT_EQ(backend.prefix, "team-a");
    EXPECT_EQ(backend.password_file, "/etc/kcache/password");
    EXPECT_EQ(backend.max_value_bytes, std::uint64_t{16} << 20);
    EXPECT_EQ(backend.sign_key_file, "/etc/kcache/sign.pem");
    EXPECT_EQ(backend.verify_key_files, (std::vector<std::string>{"/k/old.pem", "/k/new.pem"}));
    EXPECT_TRUE(backend.require_signature);
}

TEST(RemoteConfig, FlagsMayAlsoBeWrittenAsBooleans) {
    EXPECT_TRUE(backend_of("redis://cache|reshare").reshare);
    EXPECT_FALSE(backend_of("redis://cache").reshare);
    EXPECT_FALSE(backend_of("redis://cache|reshare=false").reshare);
    EXPECT_EQ(backend_of("redis://cache|reshare").redacted(), "redis://cache:6379|reshare");
    EXPECT_TRUE(backend_of("redis://cache|read-only=true").read_only);
    EXPECT_FALSE(backend_of("redis://cache|read-only=false").read_only);
    EXPECT_TRUE(backend_of("redis://cache|require-signature=true").require_signature);
    EXPECT_FALSE(backend_of("redis://cache|require-signature=false").require_signature);
}

TEST(RemoteConfig, MaxSizeIsBytesOrANumberWithAUnit) {
    EXPECT_EQ(backend_of("redis://c|max-size=1048576").max_value_bytes, 1048576u);
    EXPECT_EQ(backend_of("redis://c|max-size=2M").max_value_bytes, 2'000'000u);
    EXPECT_EQ(backend_of("redis://c|max-size=512k").max_value_bytes, 512'000u);
    EXPECT_EQ(backend_of("redis://c|max-size=3Mi").max_value_bytes, 3u << 20);
    EXPECT_EQ(backend_of("redis://c|max-size=1Gi").max_value_bytes, std::uint64_t{1} << 30);
    expect_error("redis://c|max-size=0", "bad max-size '0'");
    expect_error("redis://c|max-size=lots", "bad max-size 'lots'");
    expect_error("redis://c|max-size=-5", "bad max-size");
    // Not gigabytes, as a bare fraction would be to util::parse_size.
    expect_error("redis://c|max-size=1.5", "bad max-size '1.5'");
    EXPECT_EQ(backend_of("redis://c|max-size=18446744073709551615").max_value_bytes, UINT64_MAX);
    expect_error("redis://c|max-size=18446744073709551616", "bad max-size");
}

TEST(RemoteConfig, BusyPollIsMicrosecondsOrMillisecondsUpToTen) {
    using std::chrono::microseconds;
    EXPECT_EQ(backend_of("redis://c").busy_poll, microseconds(50));
    EXPECT_EQ(backend_of("redis://c|busy-poll=50us").busy_poll, microseconds(50));
    EXPECT_EQ(backend_of("redis://c|busy-poll=2ms").busy_poll, microseconds(2000));
    EXPECT_EQ(backend_of("redis://c|busy-poll=10ms").busy_poll, microseconds(10000));
    EXPECT_EQ(backend_of("redis://c|busy-poll=0").busy_poll, microseconds(0));
    expect_error("redis://c|busy-poll=50", "bad 'busy-poll' '50'");
    expect_error("redis://c|busy-poll=11ms", "0 to 10ms");
    expect_error("redis://c|busy-poll=1s", "bad 'busy-poll'");
    expect_error("redis://c|busy-poll=us", "bad 'busy-poll'");
    expect_error("redis://c|busy-poll=-5us", "bad 'busy-poll'");
    expect_error("redis://c|busy-poll=99999999999999999999us", "0 to 10ms");
    expect_error("redis://c|busy-poll", "needs a value");
    EXPECT_EQ(backend_of("redis://c|busy-poll=1ms").redacted(), "redis://c:6379|busy-poll=1000us");
    EXPECT_EQ(backend_of("redis://c|busy-poll=0").redacted(), "redis://c:6379|busy-poll=0us");
    EXPECT_EQ(backend_of("redis://c").redacted(), "redis://c:6379");
}

TEST(RemoteConfig, ShardsReplaceTheStarInTheHostByTheirNames) {
    const RemoteBackendConfig backend =
        backend_of("redis://u:pw@cache-*.internal:7000/2|shards=a(3),b(1),c|timeout=2s");
    ASSERT_EQ(backend.shards.size(), 3u);
    const char* const names[] = {"a", "b", "c"};
    const std::uint32_t weights[] = {3, 1, 1};
    for (std::size_t i = 0; i < 3; ++i) {
        const Shard& shard = backend.shards[i];
        EXPECT_EQ(shard.name, names[i]);
        EXPECT_EQ(shard.weight, weights[i]);
        EXPECT_EQ(shard.endpoint.host, std::string("cache-") + names[i] + ".internal");
        EXPECT_EQ(shard.endpoint.port, 7000);
        EXPECT_EQ(shard.endpoint.db, 2);
        EXPECT_EQ(shard.endpoint.user, "u");
        EXPECT_EQ(shard.endpoint.password, "pw");
    }
    EXPECT_EQ(backend.timeout, milliseconds(2000));
}

TEST(RemoteConfig, ShardsWorkOverUnixSocketsAndIpv6) {
    const RemoteBackendConfig sockets = backend_of("redis+unix:/tmp/redis-*.sock|shards=x,y(2)");
    ASSERT_EQ(sockets.shards.size(), 2u);
    EXPECT_EQ(sockets.shards[0].endpoint.socket_path, "/tmp/redis-x.sock");
    EXPECT_EQ(sockets.shards[1].endpoint.socket_path, "/tmp/redis-y.sock");
    EXPECT_EQ(sockets.shards[1].weight, 2u);

    const RemoteBackendConfig addresses = backend_of("redis://[fd00::*]:7000|shards=1,2a");
    ASSERT_EQ(addresses.shards.size(), 2u);
    EXPECT_EQ(addresses.shards[0].endpoint.host, "fd00::1");
    EXPECT_EQ(addresses.shards[1].endpoint.host, "fd00::2a");
}

TEST(RemoteConfig, ABadSchemeIsAnError) {
    expect_error("http://cache", "unknown scheme 'http'");
    expect_error("cache:6379", "unknown scheme 'cache'");
    expect_error("rediss://cache", "TLS");
    expect_error("cache.internal", "no scheme");
    expect_error("/run/redis.sock", "no scheme");
    expect_error("redis:cache", "needs //");
}

TEST(RemoteConfig, AUrlWithoutAHostIsAnError) {
    for (const char* text :
         {"redis://", "redis://:6379", "redis:///0", "redis://user@", "redis://|read-only"}) {
        expect_error(text, "no host");
    }
    expect_error("redis+unix:", "no socket path");
    expect_error("redis+unix:relative.sock", "no socket path");
    expect_error("redis+unix://localhost/run/redis.sock", "no socket path");
}

TEST(RemoteConfig, ABadHostIsAnError) {
    expect_error("redis://cache_server!:6379", "bad host");
    expect_error("redis://[::1", "without its ']'");
    expect_error("redis://[cache]:6379", "bad IPv6 address 'cache'");
    expect_error("redis://[::1]x", "after the host");
    expect_error("redis+unix:/" + std::string(200, 'p') + ".sock", "longer than 107 bytes");
}

TEST(RemoteConfig, ABadPortOrDbIsAnError) {
    expect_error("redis://cache:0", "bad port '0'");
    expect_error("redis://cache:65536", "bad port '65536'");
    expect_error("redis://cache:http", "bad port 'http'");
    expect_error("redis://cache:", "bad port ''");
    expect_error("redis://cache:-1", "bad port");
    expect_error("redis://cache/-1", "bad db '-1'");
    expect_error("redis://cache/one", "bad db 'one'");
    expect_error("redis://cache/99999999999", "bad db");
    expect_error("redis://cache/1/2", "bad db");
    expect_error("redis+unix:/tmp/r.sock?db=x", "bad db 'x'");
    expect_error("redis+unix:/tmp/r.sock?db=", "bad db");
    expect_error("redis+unix:/tmp/r.sock?timeout=1", "unknown query 'timeout=1'");
}

TEST(RemoteConfig, ShardsWithoutExactlyOneStarAreAnError) {
    expect_error("redis://cache|shards=a,b", "exactly one '*' in the host (it has 0)");
    expect_error("redis://*-*|shards=a,b", "exactly one '*' in the host (it has 2)");
    expect_error("redis+unix:/tmp/r.sock|shards=a", "exactly one '*' in the socket path");
    expect_error("redis://cache-*", "a '*' in the host needs shards=");
}

TEST(RemoteConfig, BadShardNamesAndWeightsAreAnError) {
    expect_error("redis://c-*|shards=a(0)", "bad weight '0' of shard 'a'");
    expect_error("redis://c-*|shards=a(x)", "bad weight 'x'");
    expect_error("redis://c-*|shards=a(-2)", "bad weight");
    expect_error("redis://c-*|shards=a(99999999999)", "bad weight");
    expect_error("redis://c-*|shards=a(3", "bad shard 'a(3'");
    expect_error("redis://c-*|shards=a,,b", "a shard without a name");
    expect_error("redis://c-*|shards=(2)", "a shard without a name");
    expect_error("redis://c-*|shards=a,b,a", "shard 'a' named twice");
    expect_error("redis://c-*|shards=a*", "bad shard name 'a*'");
    expect_error("redis://c-*|shards=a/b", "bad shard name");
    expect_error("redis://[fd00::*]|shards=xyz", "bad shard name 'xyz'");
    expect_error("redis://c-*|shards=", "'shards' needs a value");
}

TEST(RemoteConfig, AnUnknownAttributeIsAnErrorNamingIt) {
    expect_error("redis://cache|colour=blue", "unknown attribute 'colour'");
    expect_error("redis://cache|readonly", "unknown attribute 'readonly'");
    expect_error("redis://cache|=1s", "unknown attribute ''");
}

TEST(RemoteConfig, ABadDurationIsAnError) {
    expect_error("redis://cache|timeout=fast", "bad 'timeout' 'fast'");
    expect_error("redis://cache|timeout=0", "zero");
    expect_error("redis://cache|timeout=0ms", "zero");
    expect_error("redis://cache|connect-timeout=3601s", "more than an hour");
    expect_error("redis://cache|first-byte-timeout=3600001", "more than an hour");
    expect_error("redis://cache|timeout=99999999999999999999999s", "more than an hour");
    expect_error("redis://cache|timeout=1.5s", "bad 'timeout'");
    expect_error("redis://cache|timeout=-1", "bad 'timeout'");
    expect_error("redis://cache|timeout=10m", "bad 'timeout'");
    expect_error("redis://cache|timeout", "bad 'timeout'");
    expect_error("redis://cache|timeout=", "bad 'timeout'");
}

TEST(RemoteConfig, OtherBadAttributesAreAnError) {
    expect_error("redis://cache|timeout=1s|timeout=2s", "'timeout' given twice");
    expect_error("redis://cache|", "an empty attribute");
    expect_error("redis://cache||read-only", "an empty attribute");
    expect_error("redis://cache|prefix=", "'prefix' needs a value");
    expect_error("redis://cache|prefix", "'prefix' needs a value");
    expect_error("redis://cache|password-file", "'password-file' needs a value");
    expect_error("redis://cache|verify-key=", "'verify-key' needs a value");
    expect_error("redis://cache|read-only=maybe", "bad 'read-only' 'maybe'");
    expect_error("redis://u:%zz@cache", "percent escape in the password");
    expect_error("redis://%4@cache", "percent escape in the user");
}

TEST(RemoteConfig, AnErrorNamesTheBackendThatHasIt) {
    const std::string message = error_of("redis://good:6379 redis://bad:99999|timeout=2s");
    EXPECT_NE(message.find("'redis://bad:99999|timeout=2s'"), std::string::npos) << message;
    EXPECT_EQ(message.find("good"), std::string::npos) << message;
}

TEST(RemoteConfig, DurationsAreMillisecondsOrANumberWithMsOrS) {
    EXPECT_EQ(*parse_duration("100ms"), milliseconds(100));
    EXPECT_EQ(*parse_duration("2s"), milliseconds(2000));
    EXPECT_EQ(*parse_duration("250"), milliseconds(250));
    EXPECT_EQ(*parse_duration("3600s"), milliseconds(3'600'000));
    EXPECT_EQ(*parse_duration("3600000"), milliseconds(3'600'000));
    for (const char* text : {"", "0", "0s", "3601s", "ms", "s", "1.5s", "10m", "1 s", "-3", "1h"}) {
        auto duration = parse_duration(text);
        ASSERT_FALSE(duration.ok()) << text;
        EXPECT_EQ(duration.error().code(), Errc::kInvalidArgument);
        EXPECT_NE(duration.error().message().find(std::string("'") + text + "'"), std::string::npos)
            << duration.error().message();
    }
}

// Each text holds the password "hunter2pw" and has something else wrong with it.
const char* const kBadTextsWithAPassword[] = {
    "redis://alice:hunter2pw@cache:99999",
    "redis://alice:hunter2pw@cache|colour=blue",
    "redis://alice:hunter2pw@cache|timeout=soon",
    "redis://alice:hunter2pw@cache|shards=a",
    "redis://alice:hunter2pw@",
    "redis://alice:hunter2pw@[::1",
    "redis://alice:hunter2pw@cache/x",
    "redis://:hunter2pw@cache-*",
    "http://alice:hunter2pw@cache",
    "alice:hunter2pw@cache",
    "redis:alice:hunter2pw@cache",
    "redis+unix://alice:hunter2pw@/tmp/r.sock",
    // A '|' or a ':' that should have been escaped cuts the password where parsing expects none.
    "redis://alice:hunter|2pw@cache",
    "redis://alice:1234|hunter2pw@cache",
    "redis://alice:hun:ter2pw@cache:x",
    "redis://alice:hunter2pw%@cache",
};

TEST(RemoteConfig, NoErrorMessageHoldsAPassword) {
    for (const char* text : kBadTextsWithAPassword) {
        const std::string message = error_of(text);
        EXPECT_FALSE(message.empty()) << text;
        for (const char* piece : {"hunter", "2pw", "ter2"}) {
            EXPECT_EQ(message.find(piece), std::string::npos) << text << " gave " << message;
        }
        EXPECT_NE(message.find("***"), std::string::npos) << message;
    }
}

TEST(RemoteConfig, TheRedactedEndpointMasksThePasswordAndKeepsTheUser) {
    const RedisEndpoint endpoint = endpoint_of("redis://reader:hunter2pw@cache:6380/3");
    EXPECT_EQ(endpoint.redacted(), "redis://reader:***@cache:6380/3");
    EXPECT_EQ(endpoint_of("redis://:hunter2pw@cache").redacted(), "redis://:***@cache:6379");
    EXPECT_EQ(endpoint_of("redis://reader@cache").redacted(), "redis://reader@cache:6379");
    EXPECT_EQ(endpoint_of("redis://cache").redacted(), "redis://cache:6379");
    EXPECT_EQ(endpoint_of("redis://we%20ird%3Auser:x@cache").redacted(),
              "redis://we%20ird%3Auser:***@cache:6379");
    // A password set by whoever read it from a file is never shown either.
    RedisEndpoint socket = endpoint_of("redis+unix:/tmp/r.sock");
    socket.password = "hunter2pw";
    EXPECT_EQ(socket.redacted(), "redis+unix:/tmp/r.sock");
}

TEST(RemoteConfig, TheRedactedBackendShowsItsAttributesButNoPassword) {
    const RemoteBackendConfig backend = backend_of(
        "redis://u:hunter2pw@cache-*:7000/1|timeout=2s|connect-timeout=150ms|read-only|prefix=t"
        "|password-file=/etc/pw|max-size=1Mi|verify-key=/k1|verify-key=/k2|require-signature"
        "|first-byte-timeout=300|sign-key=/s|shards=a(2),b");
    EXPECT_EQ(backend.redacted(),
              "redis://u:***@cache-*:7000/1|connect-timeout=150ms|timeout=2s"
              "|first-byte-timeout=300ms|read-only|prefix=t|password-file=/etc/pw|max-size=1Mi"
              "|sign-key=/s|verify-key=/k1|verify-key=/k2|require-signature|shards=a(2),b");
    EXPECT_EQ(backend_of("redis://cache").redacted(), "redis://cache:6379");
    EXPECT_EQ(backend_of("redis+unix:///tmp/r.sock?db=2|max-size=1000").redacted(),
              "redis+unix:/tmp/r.sock?db=2|max-size=1000");
    // A shard name that also occurs elsewhere in the host still finds its own place.
    EXPECT_EQ(backend_of("redis://a.*.a|shards=a,b").redacted(), "redis://a.*.a:6379|shards=a,b");
}

TEST(RemoteConfig, ARedactedBackendParsesBackToTheSameBackendWithTheMaskedPassword) {
    for (const char* text : {
             "redis://u:hunter2pw@cache:7000/1|timeout=2s|read-only",
             "redis://:p%7Cw@[::1]:7001|prefix=x|max-size=12345|busy-poll=25us",
             "redis+unix:/tmp/redis-*.sock?db=3|shards=x(4),y|require-signature",
             "redis://u%40corp:pw@h-*|shards=1,2,3|verify-key=/a|verify-key=/b",
             "redis+unix:////tmp//r.sock",
         }) {
        const RemoteBackendConfig backend = backend_of(text);
        const RemoteBackendConfig again = backend_of(backend.redacted());
        ASSERT_EQ(again.shards.size(), backend.shards.size()) << text;
        for (std::size_t i = 0; i < backend.shards.size(); ++i) {
            RedisEndpoint expected = backend.shards[i].endpoint;
            if (expected.transport == Transport::kTcp && !expected.password.empty()) {
                expected.password = "***";
            }
            EXPECT_EQ(again.shards[i].endpoint, expected) << text;
            EXPECT_EQ(again.shards[i].name, backend.shards[i].name);
            EXPECT_EQ(again.shards[i].weight, backend.shards[i].weight);
        }
        EXPECT_EQ(again.busy_poll, backend.busy_poll);
        EXPECT_EQ(again.redacted(), backend.redacted());
    }
}

TEST(RemoteConfig, RedactingTheSettingChangesOnlyThePasswords) {
    EXPECT_EQ(redact_remote_setting("redis://u:hunter2pw@cache|timeout=1s \t redis+unix:/s\n"),
              "redis://u:***@cache|timeout=1s \t redis+unix:/s\n");
    EXPECT_EQ(redact_remote_setting("redis://cache:6379/2"), "redis://cache:6379/2");
    EXPECT_EQ(redact_remote_setting("redis://a:b/c@d@cache"), "redis://a:***@cache");
    // An '@' in an attribute of a text that parses is no userinfo.
    EXPECT_EQ(redact_remote_setting("redis+unix:/s|prefix=a:b@c"), "redis+unix:/s|prefix=a:b@c");
    EXPECT_EQ(redact_remote_setting("redis://cache:6379|prefix=a@b"),
              "redis://cache:6379|prefix=a@b");
    EXPECT_EQ(redact_remote_setting(""), "");
}

TEST(RemoteConfig, RedactingMasksPasswordsInTextsThatDoNotParse) {
    for (const char* text : kBadTextsWithAPassword) {
        const std::string redacted = redact_remote_setting(std::string("redis://ok ") + text);
        EXPECT_TRUE(redacted.starts_with("redis://ok ")) << redacted;
        for (const char* piece : {"hunter", "2pw", "ter2"}) {
            EXPECT_EQ(redacted.find(piece), std::string::npos) << text << " gave " << redacted;
        }
    }
    EXPECT_EQ(redact_remote_setting("garbage u:pw@h"), "garbage u:***@h");
}

TEST(RemoteConfig, AnAclUserForASocketIsAnAttributeAndRoundTrips) {
    auto parsed = parse_remote_setting("redis+unix:/run/r.sock|user=builder|password-file=/etc/pw");
    ASSERT_TRUE(parsed.ok()) << parsed.error().describe();
    ASSERT_EQ(parsed->size(), 1u);
    EXPECT_EQ((*parsed)[0].shards.at(0).endpoint.user, "builder");
    const std::string redacted = (*parsed)[0].redacted();
    EXPECT_NE(redacted.find("|user=builder"), std::string::npos) << redacted;
    auto again = parse_remote_setting(redacted);
    ASSERT_TRUE(again.ok()) << again.error().describe();
    EXPECT_EQ((*again)[0].shards.at(0).endpoint, (*parsed)[0].shards.at(0).endpoint);
    EXPECT_FALSE(parse_remote_setting("redis://u@h|user=v").ok()) << "a user given twice";
    EXPECT_FALSE(parse_remote_setting("redis://h|user=").ok());
    auto tcp = parse_remote_setting("redis://h|user=reader");
    ASSERT_TRUE(tcp.ok());
    EXPECT_EQ((*tcp)[0].shards.at(0).endpoint.user, "reader");
}

}  // namespace
}  // namespace kcache::store::remote
