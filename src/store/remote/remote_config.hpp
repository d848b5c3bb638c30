// SPDX-License-Identifier: Apache-2.0
// The `remote` setting (KCACHE_REMOTE, `remote` in kcache.conf, -o remote=…): one or more
// backends separated by whitespace, each a URL with attributes in ccache's style after it:
//
//   redis://[USER[:PASSWORD]@]HOST[:PORT][/DB]|connect-timeout=100ms|timeout=1s|read-only
//   redis+unix:/path/to/sock[?db=N]|prefix=team-a
//   redis://cache-*.internal|shards=a(3),b(1)         (`*` replaced by each shard's name)
//
// A bad URL or attribute is an error naming it, never a silent default. Parsing reads no file:
// the password file and signing keys are read by whoever builds the backends.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kcache/result.hpp"

namespace kcache::store::remote {

// One Redis server.
struct RedisEndpoint {
    enum class Transport : std::uint8_t { kTcp, kUnix };
    Transport transport = Transport::kTcp;
    std::string host;           // kTcp: a name or address (IPv6 in brackets in the URL)
    std::uint16_t port = 6379;  // kTcp
    std::string socket_path;    // kUnix
    int db = 0;
    std::string user;      // an ACL user (Redis 6+); empty: the default user
    std::string password;  // never printed: see redacted()

    // The endpoint as a URL with any password replaced by "***": what logs, errors, `kcache -p`
    // and `kcache remote ping` show.
    std::string redacted() const;
    bool operator==(const RedisEndpoint&) const = default;
};

struct Shard {
    RedisEndpoint endpoint;
    std::string name;  // what replaced the URL's `*`; empty for an unsharded backend
    std::uint32_t weight = 1;
};

struct RemoteBackendConfig {
    // One for a plain URL; one per shard for `shards=` (keys spread by weighted rendezvous
    // hashing).
    std::vector<Shard> shards;
    std::chrono::milliseconds connect_timeout{100};  // `connect-timeout`: connecting, AUTH, SELECT
    std::chrono::milliseconds timeout{1000};         // `timeout`: one request, first byte to last
    // `first-byte-timeout`: from sending a request to the reply's first byte; defaults to timeout.
    std::optional<std::chrono::milliseconds> first_byte_timeout;
    // `busy-poll` (0: off): after a request, its reply is awaited this long without
    // sleeping, which a server on the same host or rack answers within.
    std::chrono::microseconds busy_poll{50};
    bool read_only = false;  // `read-only`: never written to
    // `reshare`: entries this process finds in its disk tier are uploaded too, where the backend
    // lacks them (as ccache's reshare): a fleet fills a new server from nodes' disks.
    bool reshare = false;
    std::string prefix = "kcache";  // `prefix`: keys are "<prefix>:<fingerprint hex>"
    std::string password_file;      // `password-file`: read by whoever builds the backend
    // (`user=NAME`: the ACL user, for a socket's URL, which has no place for one.)
    std::uint64_t max_value_bytes = std::uint64_t{64} << 20;  // `max-size`: larger is not stored
    // Signatures (store/remote/signature.hpp): `sign-key=PATH` signs what this process uploads;
    // `verify-key=PATH` (repeatable, for rotation) names keys a value may be signed with;
    // `require-signature` makes an unsigned or badly signed value a miss.
    std::string sign_key_file;
    std::vector<std::string> verify_key_files;
    bool require_signature = false;

    // The whole backend as the user wrote it, passwords replaced by "***".
    std::string redacted() const;
};

// kInvalidArgument naming the backend (redacted) and what is wrong: a bad scheme, no host, a bad
// port or db, shards without exactly one `*` in the host, an unknown attribute, a bad duration
// (a number with ms or s), a bad weight. An empty or all-blank text is no backend.
Result<std::vector<RemoteBackendConfig>> parse_remote_setting(std::string_view text);

// "100ms", "1s", "250" (milliseconds); kInvalidArgument otherwise, or for more than an hour.
Result<std::chrono::milliseconds> parse_duration(std::string_view text);

// The setting with every password replaced by "***", as it may be printed.
std::string redact_remote_setting(std::string_view text);

}  // namespace kcache::store::remote
