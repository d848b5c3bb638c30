// SPDX-License-Identifier: Apache-2.0
// One configured backend of the remote tier: its servers (one, or shards chosen per key by
// rendezvous hashing), its keys' names, its signing and verify keys, and whether it may be
// written. Thread safe.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kcache/result.hpp"
#include "store/remote/redis_server_client.hpp"
#include "store/remote/remote_config.hpp"
#include "store/remote/remote_stats.hpp"
#include "store/remote/signature.hpp"
#include "util/fingerprint.hpp"

namespace kcache::store::remote {

class RemoteBackend {
public:
    // Reads the password file (or takes `environment_password`, KCACHE_REMOTE_PASSWORD, for
    // endpoints without a password) and the signing and verify keys. Connects to nothing yet.
    static Result<std::unique_ptr<RemoteBackend>> open(
        RemoteBackendConfig config, const std::optional<std::string>& environment_password,
        RemoteCounters& counters);

    // "<prefix>:<fingerprint hex>": the value's key.
    std::string value_key(const util::Fingerprint& fingerprint) const;
    // "<prefix>:lease:<fingerprint hex>": the lease's key, kept on the value's server
    // (server_for(value_key(...))), so that a shard's keys and their leases live and die together.
    std::string lease_key(const util::Fingerprint& fingerprint) const;
    // The server that holds `key`.
    RedisServerClient& server_for(std::string_view key);
    // Every server (one per shard), for what asks each of them (a scan).
    const std::vector<std::unique_ptr<RedisServerClient>>& servers() const noexcept {
        return servers_;
    }

    const RemoteBackendConfig& config() const noexcept { return config_; }
    const Signer* signer() const noexcept { return signer_ ? &*signer_ : nullptr; }
    const Verifier& verifier() const noexcept { return verifier_; }
    // Not read-only by configuration, not a backend that requires signatures without a key to
    // sign with, and no write was refused for permissions.
    bool writable() const noexcept { return !read_only_.load(std::memory_order_relaxed); }
    // A write refused with NOPERM: read-only for the rest of the process, said once.
    void refuse_writes(std::string_view why);
    const std::string& name() const noexcept { return name_; }

private:
    RemoteBackend(RemoteBackendConfig config, RemoteCounters& counters);

    RemoteBackendConfig config_;
    std::string name_;                                         // redacted
    std::vector<std::unique_ptr<RedisServerClient>> servers_;  // one per shard
    std::optional<Signer> signer_;
    Verifier verifier_;
    std::atomic<bool> read_only_{false};
};

}  // namespace kcache::store::remote
