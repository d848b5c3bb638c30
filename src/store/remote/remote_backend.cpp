// SPDX-License-Identifier: Apache-2.0
#include "store/remote/remote_backend.hpp"

#include <algorithm>
#include <utility>

#include "store/cache_directory.hpp"
#include "store/remote/rendezvous.hpp"
#include "util/files.hpp"
#include "util/log.hpp"
#include "util/try.hpp"

namespace kcache::store::remote {
namespace {

// A password file holds one line; anything larger is not a password file.
constexpr std::uint64_t kMaxPasswordFileBytes = 4096;

Result<std::string> read_password_file(const std::string& path) {
    auto text = util::read_named_file(path, kMaxPasswordFileBytes);
    if (!text)
        return Error(Errc::kIoError, "password file " + path + ": " + text.error().message());
    if (!*text) return Error(Errc::kIoError, "password file " + path + " does not exist");
    std::string password = std::move(**text);
    while (!password.empty() && (password.back() == '\n' || password.back() == '\r')) {
        password.pop_back();
    }
    if (password.empty())
        return Error(Errc::kInvalidArgument, "password file " + path + " is empty");
    return password;
}

}  // namespace

RemoteBackend::RemoteBackend(RemoteBackendConfig config, RemoteCounters& counters)
    : config_(std::move(config)), name_(config_.redacted()) {
    Deadlines deadlines;
    deadlines.connect = config_.connect_timeout;
    deadlines.total = config_.timeout;
    deadlines.first_byte = config_.first_byte_timeout.value_or(config_.timeout);
    deadlines.busy_poll = config_.busy_poll;
    // No value is larger than a disk entry may be (plus its signature); a reply holds at most one
    // value and a little framing.
    config_.max_value_bytes =
        std::min<std::uint64_t>(config_.max_value_bytes, kMaxEntryBytes + 4096);
    const std::size_t max_reply = static_cast<std::size_t>(config_.max_value_bytes) + 4096;
    for (const Shard& shard : config_.shards) {
        servers_.push_back(
            std::make_unique<RedisServerClient>(shard.endpoint, deadlines, max_reply, counters));
    }
    read_only_.store(config_.read_only, std::memory_order_relaxed);
}

Result<std::unique_ptr<RemoteBackend>> RemoteBackend::open(
    RemoteBackendConfig config, const std::optional<std::string>& environment_password,
    RemoteCounters& counters) {
    std::optional<std::string> password;
    if (!config.password_file.empty()) {
        TRY_ASSIGN(password, read_password_file(config.password_file));
    } else {
        password = environment_password;
    }
    for (Shard& shard : config.shards) {
        if (shard.endpoint.password.empty() && password) shard.endpoint.password = *password;
    }
    std::optional<Signer> signer;
    if (!config.sign_key_file.empty()) {
        TRY_ASSIGN(signer, Signer::load(config.sign_key_file));
    }
    Verifier verifier;
    if (!config.verify_key_files.empty()) {
        TRY_ASSIGN(verifier, Verifier::load(config.verify_key_files));
    }
    if (config.require_signature && verifier.empty()) {
        return Error(Errc::kInvalidArgument,
                     config.redacted() + ": require-signature needs at least one verify-key");
    }
    // A backend that requires signatures takes only signed values: a node that cannot sign must
    // not fill it with values every node would refuse (and SET NX would keep).
    const bool unsigned_writer = config.require_signature && !signer;
    std::unique_ptr<RemoteBackend> backend(new RemoteBackend(std::move(config), counters));
    backend->signer_ = std::move(signer);
    backend->verifier_ = std::move(verifier);
    if (unsigned_writer) backend->read_only_.store(true, std::memory_order_relaxed);
    return backend;
}

std::string RemoteBackend::value_key(const util::Fingerprint& fingerprint) const {
    return config_.prefix + ":" + fingerprint.hex();
}

std::string RemoteBackend::lease_key(const util::Fingerprint& fingerprint) const {
    return config_.prefix + ":lease:" + fingerprint.hex();
}

RedisServerClient& RemoteBackend::server_for(std::string_view key) {
    if (servers_.size() == 1) return *servers_.front();
    std::vector<RendezvousShard> shards;
    shards.reserve(config_.shards.size());
    for (const Shard& shard : config_.shards) shards.push_back({shard.name, shard.weight});
    return *servers_[rendezvous_pick(shards, key)];
}

void RemoteBackend::refuse_writes(std::string_view why) {
    if (read_only_.exchange(true, std::memory_order_relaxed)) return;
    util::warn_once("remote-read-only:" + name_,
                    "remote backend " + name_ + " refused a write (" + std::string(why) +
                        "); it is read-only for the rest of this process");
}

}  // namespace kcache::store::remote
