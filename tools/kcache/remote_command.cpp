// SPDX-License-Identifier: Apache-2.0
#include "tools/kcache/remote_command.hpp"

#include <chrono>
#include <cstdio>
#include <random>
#include <tuple>

#include "cache/remote_options.hpp"
#include "store/disk_store.hpp"
#include "store/key_index.hpp"
#include "store/remote/redis_connection.hpp"
#include "store/remote/remote_sync.hpp"
#include "store/remote/signature.hpp"
#include "tools/kcache/output.hpp"
#include "util/size.hpp"

namespace kcache::tool {
namespace {

using store::remote::RedisConnection;

double milliseconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
        .count();
}

// The remote tier of `options`, or the exit status of a usage error (printed).
std::unique_ptr<store::remote::RemoteTier> open_remote(const CacheOptions& options, int& status) {
    auto remote = cache::remote_options(options);
    if (!remote) {
        std::fprintf(stderr, "kcache: remote: %s\n", remote.error().message().c_str());
        status = 2;
        return nullptr;
    }
    if (remote->backends.empty()) {
        std::fprintf(stderr,
                     "kcache: no remote tier configured (set KCACHE_REMOTE, or -o remote=…)\n");
        status = 2;
        return nullptr;
    }
    auto tier = store::remote::RemoteTier::open(std::move(*remote));
    if (!tier) {
        std::fprintf(stderr, "kcache: remote: %s\n", tier.error().message().c_str());
        status = 1;
        return nullptr;
    }
    return std::move(*tier);
}

void say_problems(const char* command, const std::vector<std::string>& problems) {
    for (const auto& problem : problems) {
        std::fprintf(stderr, "kcache: %s: %s\n", command, escape_text(problem).c_str());
    }
}

struct PingResult {
    std::string server;
    bool reachable = false;
    double connect_ms = 0;
    double round_trip_ms = 0;  // the fastest of a few PINGs
    std::string writes;        // "allowed", "read-only (configured)", "refused: NOPERM ..."
    std::string scripts;       // EVAL, which leases and the removal of corrupt values need
    std::string error;
};

PingResult ping_server(const store::remote::RemoteBackend& backend,
                       const store::remote::RedisEndpoint& endpoint) {
    PingResult result;
    result.server = endpoint.redacted();
    const auto& config = backend.config();
    store::remote::Deadlines deadlines;
    deadlines.connect = config.connect_timeout;
    deadlines.total = config.timeout;
    deadlines.first_byte = config.first_byte_timeout.value_or(config.timeout);
    const auto start = std::chrono::steady_clock::now();
    auto connection = RedisConnection::open(endpoint, deadlines, 1 << 20);
    result.connect_ms = milliseconds_since(start);
    if (!connection) {
        result.error = connection.error().message();
        return result;
    }
    result.round_trip_ms = 1e9;
    for (int i = 0; i < 5; ++i) {
        const auto sent = std::chrono::steady_clock::now();
        auto reply = (*connection)->command({"PING"});
        if (!reply || reply->is_error()) {
            result.error = reply ? reply->text : reply.error().message();
            return result;
        }
        result.round_trip_ms = std::min(result.round_trip_ms, milliseconds_since(sent));
    }
    result.reachable = true;
    if (config.read_only) {
        result.writes = "read-only (configured)";
        return result;
    }
    // A probe key that expires by itself: the write is allowed if the server takes it.
    std::random_device random;
    const std::string key = config.prefix + ":ping:" + std::to_string(random());
    auto reply = (*connection)->command({"SET", key, "1", "NX", "PX", "10000"});
    if (!reply) {
        result.writes = "unknown: " + reply.error().message();
    } else if (reply->is_error()) {
        result.writes = "refused: " + reply->text;
    } else {
        result.writes = "allowed";
        std::ignore = (*connection)->command({"DEL", key});
        auto script = (*connection)->command({"EVAL", "return 1", "0"});
        result.scripts = !script              ? "unknown: " + script.error().message()
                         : script->is_error() ? "refused: " + script->text
                                              : "allowed";
    }
    return result;
}

}  // namespace

int remote_ping(const CacheOptions& options, bool json) {
    int status = 0;
    auto remote = open_remote(options, status);
    if (!remote) return status;
    Json document = json_document();
    document["backends"] = Json::array();
    bool all_reachable = true;
    for (const auto& backend : remote->backends()) {
        Json servers = Json::array();
        if (!json) std::printf("%s\n", escape_text(backend->name()).c_str());
        for (const auto& shard : backend->config().shards) {
            const PingResult result = ping_server(*backend, shard.endpoint);
            all_reachable = all_reachable && result.reachable;
            if (json) {
                Json server;
                put_bytes(server, "server", result.server);
                server["reachable"] = result.reachable;
                server["connect_ms"] = result.connect_ms;
                server["round_trip_ms"] = result.reachable ? result.round_trip_ms : 0.0;
                put_bytes(server, "writes", result.writes);
                put_bytes(server, "scripts", result.scripts);
                put_bytes(server, "error", result.error);
                servers.push_back(std::move(server));
                continue;
            }
            if (result.reachable) {
                std::printf("  %s: reachable, connect %.2f ms, round trip %.3f ms, writes %s%s\n",
                            escape_text(result.server).c_str(), result.connect_ms,
                            result.round_trip_ms, escape_text(result.writes).c_str(),
                            result.scripts.empty()
                                ? ""
                                : (", scripts (leases) " + escape_text(result.scripts)).c_str());
            } else {
                std::printf("  %s: NOT reachable after %.2f ms: %s\n",
                            escape_text(result.server).c_str(), result.connect_ms,
                            escape_text(result.error).c_str());
            }
        }
        if (json) {
            Json entry;
            put_bytes(entry, "backend", backend->name());
            entry["servers"] = std::move(servers);
            document["backends"].push_back(std::move(entry));
        }
    }
    if (json) print_json(document);
    return all_reachable ? 0 : 1;
}

int remote_push(const CacheOptions& options, const store::CacheDirectory& directory,
                std::uint64_t batch_bytes) {
    int status = 0;
    auto remote = open_remote(options, status);
    if (!remote) return status;
    auto report = store::remote::push_entries(directory, *remote, batch_bytes);
    if (!report) {
        std::fprintf(stderr, "kcache: push: %s\n", report.error().message().c_str());
        return report.error().code() == Errc::kInvalidArgument ? 2 : 1;
    }
    say_problems("push", report->problems);
    std::printf(
        "%llu entries: %llu uploaded (%s), %llu there already, %llu bad, %llu over a "
        "max-size, %llu failed\n",
        static_cast<unsigned long long>(report->entries),
        static_cast<unsigned long long>(report->uploaded), util::format_size(report->bytes).c_str(),
        static_cast<unsigned long long>(report->present),
        static_cast<unsigned long long>(report->bad),
        static_cast<unsigned long long>(report->too_large),
        static_cast<unsigned long long>(report->failed));
    return report->failed == 0 && report->bad == 0 ? 0 : 1;
}

int remote_pull(const CacheOptions& options, std::shared_ptr<store::CacheDirectory> directory,
                const std::vector<std::string>& fingerprints, const std::string& arch,
                std::uint64_t batch_bytes) {
    std::vector<util::Fingerprint> wanted;
    for (const auto& text : fingerprints) {
        auto fingerprint = store::parse_fingerprint(text);
        if (!fingerprint) {
            std::fprintf(stderr, "kcache: pull: '%s' is not a fingerprint (32 hex digits)\n",
                         escape_text(text).c_str());
            return 2;
        }
        wanted.push_back(*fingerprint);
    }
    if (wanted.empty() && arch.empty()) {
        std::fprintf(stderr, "kcache: pull wants fingerprints or --arch\n");
        return 2;
    }
    int status = 0;
    auto remote = open_remote(options, status);
    if (!remote) return status;
    auto disk = store::DiskStore::over(std::move(directory), options.disk_max_bytes,
                                       options.disk_max_files);
    auto report = store::remote::pull_entries(*disk, *remote, wanted, arch, batch_bytes);
    if (!report) {
        std::fprintf(stderr, "kcache: pull: %s\n", report.error().message().c_str());
        return 1;
    }
    say_problems("pull", report->problems);
    std::printf(
        "%llu asked: %llu fetched (%s), %llu on disk already, %llu missing, %llu of "
        "another arch\n",
        static_cast<unsigned long long>(report->asked),
        static_cast<unsigned long long>(report->fetched), util::format_size(report->bytes).c_str(),
        static_cast<unsigned long long>(report->present),
        static_cast<unsigned long long>(report->missing),
        static_cast<unsigned long long>(report->skipped));
    return report->problems.empty() && (wanted.empty() || report->missing == 0) ? 0 : 1;
}

int keygen(const KeygenOptions& options) {
    Result<void> made = ok();
    if (options.scheme == "ed25519") {
        if (options.public_path.empty()) {
            std::fprintf(stderr, "kcache: keygen ed25519 wants a private and a public key path\n");
            return 2;
        }
        made = store::remote::generate_ed25519_key(options.private_path, options.public_path);
    } else if (options.scheme == "hmac") {
        made = store::remote::generate_hmac_secret(options.private_path);
    } else {
        std::fprintf(stderr, "kcache: keygen: unknown scheme '%s' (ed25519 or hmac)\n",
                     escape_text(options.scheme).c_str());
        return 2;
    }
    if (!made) {
        std::fprintf(stderr, "kcache: keygen: %s\n", made.error().message().c_str());
        return 1;
    }
    if (options.scheme == "ed25519") {
        std::printf(
            "signing key %s (keep it on the build machine), verify key %s (give it to the "
            "fleet)\n",
            escape_text(options.private_path).c_str(), escape_text(options.public_path).c_str());
    } else {
        std::printf("shared secret %s (every node that signs or verifies needs it)\n",
                    escape_text(options.private_path).c_str());
    }
    return 0;
}

}  // namespace kcache::tool
