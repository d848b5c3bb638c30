// SPDX-License-Identifier: Apache-2.0
#include "store/remote/remote_tier.hpp"

#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <random>
#include <tuple>
#include <utility>

#include "util/hex.hpp"
#include "util/log.hpp"
#include "util/try.hpp"

namespace kcache::store::remote {
namespace {

// Compare-and-delete and compare-and-renew: a lease is released or extended only by the holder
// whose token it still holds, never after it expired and another node took it.
// A holder whose value is not there (its compile failed, its upload was refused or dropped)
// leaves a marker instead, for the lease's time: the nodes waiting on it then compile at once
// rather than take the lease over one after another.
constexpr std::string_view kReleaseScript =
    "if redis.call('get', KEYS[1]) == ARGV[1] then if ARGV[2] == '1' then "
    "return redis.call('del', KEYS[1]) else return redis.call('set', KEYS[1], ARGV[3], 'PX', "
    "ARGV[4]) end else return 0 end";
// A corrupt value is removed only if it is still the bytes that were read (by their SHA-1, which
// Redis's Lua can compute), so that a good value another node wrote meanwhile stays.
constexpr std::string_view kRemoveIfSameScript =
    "local v = redis.call('get', KEYS[1]) if v and redis.sha1hex(v) == ARGV[1] then "
    "return redis.call('del', KEYS[1]) else return 0 end";
constexpr std::string_view kRenewScript =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], "
    "ARGV[2]) else return 0 end";

constexpr std::size_t kMaxRejectionsRemembered = 4096;
// Disk hits a process remembers having shared again (`reshare`).
constexpr std::size_t kMaxReshared = 65536;

// What a released lease without a value leaves under the lease's key.
constexpr std::string_view kNoValueMarker = "no-value";

// A lease renewed every third of its time needs some time to work with.
constexpr std::chrono::milliseconds kShortestLease{300};

// A failed or refused script (no EVAL for this ACL user, say) is said once: leases that are not
// renewed expire under their holders, and corrupt values stay.
void check_script_reply(const Result<RedisReply>& reply, const RemoteBackend& backend,
                        std::string_view what) {
    if (reply && !reply->is_error()) return;
    util::warn_once("remote-script:" + backend.name(),
                    "remote " + std::string(what) + " on " + backend.name() +
                        " failed: " + (reply ? reply->text : reply.error().message()));
}

std::string sha1_hex(std::string_view bytes) {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    if (EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha1(), nullptr) != 1) {
        return {};
    }
    return util::to_hex(std::string_view(reinterpret_cast<const char*>(digest), length));
}

std::string host_name() {
    char name[256] = {};
    if (gethostname(name, sizeof name - 1) != 0) return "unknown-host";
    return name;
}

std::string random_hex() {
    std::random_device device;
    const std::uint32_t words[2] = {device(), device()};
    return util::to_hex(std::string_view(reinterpret_cast<const char*>(words), sizeof words));
}

}  // namespace

Lease::Lease(Lease&& other) noexcept
    : tier_(std::exchange(other.tier_, nullptr)),
      fingerprint_(other.fingerprint_),
      id_(other.id_) {}

Lease& Lease::operator=(Lease&& other) noexcept {
    if (this != &other) {
        release();
        tier_ = std::exchange(other.tier_, nullptr);
        fingerprint_ = other.fingerprint_;
        id_ = other.id_;
    }
    return *this;
}

Lease::~Lease() {
    release();
}

void Lease::release(bool value_there) noexcept {
    if (tier_ != nullptr) std::exchange(tier_, nullptr)->release(fingerprint_, id_, value_there);
}

RemoteTier::RemoteTier(RemoteOptions options)
    : owner_(getpid()),
      options_(std::move(options)),
      token_prefix_(host_name() + ":" + std::to_string(owner_) + ":" + random_hex()) {}

Result<std::unique_ptr<RemoteTier>> RemoteTier::open(RemoteOptions options) {
    options.lease_time = std::max(options.lease_time, kShortestLease);
    std::unique_ptr<RemoteTier> tier(new RemoteTier(std::move(options)));
    for (const RemoteBackendConfig& config : tier->options_.backends) {
        TRY_ASSIGN(auto backend, RemoteBackend::open(config, tier->options_.environment_password,
                                                     tier->counters_));
        tier->reshares_ = tier->reshares_ || backend->config().reshare;
        tier->backends_.push_back(std::move(backend));
    }
    RemoteTier* self = tier.get();
    tier->uploads_ =
        std::make_unique<UploadQueue>([self](const Upload& upload) { return self->send(upload); },
                                      tier->options_.queue_entries, tier->options_.queue_bytes);
    tier->renewer_ = std::thread([self] { self->renew_leases(); });
    return tier;
}

RemoteTier::~RemoteTier() {
    finish_uploads(options_.exit_grace);
    stop_renewing();
    if (getpid() != owner_) (void)leases_.release();  // see Leases
}

std::shared_ptr<const VerifiedArtifact> RemoteTier::get(const util::Fingerprint& fingerprint) {
    for (auto& backend : backends_) {
        const std::string key = backend->value_key(fingerprint);
        RedisFailure why = RedisFailure::kNone;
        auto reply = backend->server_for(key).command({"GET", key}, &why);
        if (!reply && why == RedisFailure::kTooLarge && first_rejection(fingerprint, "too large")) {
            RemoteCounters::add(counters_.too_large);
        }
        if (!reply || reply->is_nil()) continue;  // other failures: counted by the server client
        if (reply->is_error()) {  // LOADING, NOPERM for this user, WRONGTYPE: the server's say
            RemoteCounters::add(counters_.errors);
            util::warn_once("remote-read:" + backend->name(),
                            "remote read from " + backend->name() + " refused: " + reply->text);
            continue;
        }
        if (auto artifact = check_value(*backend, fingerprint, *reply)) return artifact;
    }
    return nullptr;
}

std::shared_ptr<const VerifiedArtifact> RemoteTier::check_value(
    RemoteBackend& backend, const util::Fingerprint& fingerprint, const RedisReply& reply) {
    const std::string key = backend.value_key(fingerprint);
    // A value rejected before (a miss asks the tiers more than once, and a signature reject is
    // not removed) is not counted or said again.
    const std::string_view value = reply.text;
    const auto reject = [&](std::atomic<std::uint64_t>& counter, const std::string& digest) {
        if (!first_rejection(fingerprint, digest)) return false;
        RemoteCounters::add(counter);
        return true;
    };
    // A corrupt value is a miss, and is removed so that the compile this miss leads to can
    // store a good one (SET NX would otherwise keep the bad one for every node).
    const auto corrupt = [&](const std::string& why) {
        const std::string digest = sha1_hex(value);
        if (!reject(counters_.corrupt, digest)) return nullptr;
        util::warn_once("remote-corrupt:" + backend.name(), "remote value " + key + " on " +
                                                                backend.name() + " is corrupt (" +
                                                                why + "); removed and rebuilt");
        if (backend.writable() && reply.type == RedisReply::Type::kString && !digest.empty()) {
            check_script_reply(
                backend.server_for(key).command({"EVAL", kRemoveIfSameScript, "1", key, digest}),
                backend, "removal of a corrupt value");
        }
        return nullptr;
    };
    if (reply.type != RedisReply::Type::kString) return corrupt("not a string");
    if (value.size() > backend.config().max_value_bytes) {
        reject(counters_.too_large, sha1_hex(value));
        return nullptr;
    }
    auto split = split_value(value);
    if (!split) return corrupt(split.error().message());
    const RemoteBackendConfig& config = backend.config();
    if (config.require_signature || (split->signed_ && !backend.verifier().empty())) {
        const Verdict verdict = backend.verifier().verify(fingerprint, *split);
        // Without require-signature an unsigned value, or one signed by a key not configured
        // here, is taken as an unsigned one would be; a signature that fails is never taken.
        if (verdict != Verdict::kValid &&
            (config.require_signature || verdict == Verdict::kForged)) {
            if (!reject(counters_.signature_rejects, sha1_hex(value))) return nullptr;
            util::warn_once("remote-signature:" + backend.name(),
                            "remote value " + key + " on " + backend.name() +
                                " rejected: " + verdict_name(verdict));
            return nullptr;
        }
    }
    auto artifact = VerifiedArtifact::decode(std::string(split->entry));
    if (!artifact) return corrupt(artifact.error().message());
    return std::move(artifact).value();
}

bool RemoteTier::first_rejection(const util::Fingerprint& fingerprint, const std::string& digest) {
    std::lock_guard lock(rejected_mutex_);
    const std::pair key{fingerprint.high, fingerprint.low};
    if (auto it = rejected_.find(key); it != rejected_.end() && it->second == digest) return false;
    // Bounded: forgetting old rejections only counts each once more.
    if (rejected_.size() >= kMaxRejectionsRemembered) rejected_.clear();
    rejected_[key] = digest;
    return true;
}

std::string RemoteTier::value_for(const RemoteBackend& backend,
                                  const util::Fingerprint& fingerprint, std::string_view entry) {
    return backend.signer() != nullptr ? backend.signer()->sign(fingerprint, entry)
                                       : std::string(entry);
}

void RemoteTier::count_lookup(bool hit) noexcept {
    RemoteCounters::add(hit ? counters_.hits : counters_.misses);
}

void RemoteTier::put(const util::Fingerprint& fingerprint, std::string entry, Lease lease) {
    Upload upload{fingerprint, std::move(entry), false, {}};
    if (lease) {
        // The lease goes with the upload: released by the queue's thread once the value is sent.
        auto held = std::make_shared<Lease>(std::move(lease));
        upload.then = [held](bool there) { held->release(there); };
    }
    if (!uploads_->push(std::move(upload))) RemoteCounters::add(counters_.writes_dropped);
}

void RemoteTier::reshare(const util::Fingerprint& fingerprint, std::string_view entry) {
    if (!reshares_) return;
    {
        std::lock_guard lock(reshared_mutex_);
        // Bounded: forgetting only costs a backend an EXISTS it answers with "there".
        if (reshared_.size() >= kMaxReshared) reshared_.clear();
        if (!reshared_.insert({fingerprint.high, fingerprint.low}).second) return;
    }
    Upload upload{fingerprint, std::string(entry), true, {}};
    if (!uploads_->push(std::move(upload))) RemoteCounters::add(counters_.writes_dropped);
}

bool RemoteTier::send(const Upload& upload) {
    bool there = false;
    for (auto& backend : backends_) {
        if (!backend->writable()) continue;
        if (upload.reshare && !backend->config().reshare) continue;
        const std::string key = backend->value_key(upload.fingerprint);
        if (upload.reshare) {
            // Most disk hits are of values the fleet shares already: asked first, so that their
            // bytes are not sent for nothing.
            auto exists = backend->server_for(key).command({"EXISTS", key});
            if (!exists || exists->is_error() || exists->integer != 0) continue;
        }
        const std::string value = value_for(*backend, upload.fingerprint, upload.entry);
        if (value.size() > backend->config().max_value_bytes) {
            RemoteCounters::add(counters_.too_large);
            continue;
        }
        auto reply = backend->server_for(key).command({"SET", key, value, "NX"});
        // A failure is counted by the server client.
        if (reply && count_write(*backend, *reply)) there = true;
    }
    return there;
}

bool RemoteTier::count_write(RemoteBackend& backend, const RedisReply& reply) {
    if (reply.is_nil()) {
        RemoteCounters::add(counters_.writes_exists);
        return true;
    }
    if (reply.is_error()) {
        RemoteCounters::add(counters_.write_errors);
        if (reply.error_code() == "NOPERM") {
            backend.refuse_writes(reply.text);
        } else {
            util::warn_once("remote-write:" + backend.name(),
                            "remote write to " + backend.name() + " refused: " + reply.text);
        }
        return false;
    }
    RemoteCounters::add(counters_.writes);
    return true;
}

RemoteBackend* RemoteTier::lease_backend() {
    for (auto& backend : backends_) {
        if (backend->writable()) return backend.get();
    }
    return nullptr;
}

RemoteTier::LeaseState RemoteTier::take_lease(const util::Fingerprint& fingerprint, Lease& lease) {
    // A forked child takes no lease: its leases would be renewed by no thread (the renewer is the
    // parent's), and the lock a parent thread held at the fork may stay held.
    if (getpid() != owner_) return LeaseState::kNoLease;
    RemoteBackend* backend = lease_backend();
    if (backend == nullptr) return LeaseState::kNoLease;
    const std::string key = backend->lease_key(fingerprint);
    RedisServerClient& server = backend->server_for(backend->value_key(fingerprint));
    std::uint64_t id = 0;
    std::string token;
    {
        std::lock_guard lock(leases_->mutex);
        id = leases_->next_id++;
        token = token_prefix_ + ":" + std::to_string(id);
    }
    const std::string ttl = std::to_string(options_.lease_time.count());
    auto reply = server.command({"SET", key, token, "NX", "PX", ttl});
    if (!reply) return LeaseState::kNoLease;
    if (reply->is_nil()) return LeaseState::kHeld;
    if (reply->is_error()) {
        // A refused lease is a refused write (NOPERM makes the backend read-only, OOM says the
        // server is full): compiled here, without one.
        RemoteCounters::add(counters_.write_errors);
        if (reply->error_code() == "NOPERM") backend->refuse_writes(reply->text);
        return LeaseState::kNoLease;
    }
    {
        std::lock_guard lock(leases_->mutex);
        leases_->held.emplace(id, HeldLease{fingerprint, std::move(token), backend});
    }
    lease = Lease();
    lease.tier_ = this;
    lease.fingerprint_ = fingerprint;
    lease.id_ = id;
    return LeaseState::kWon;
}

RemoteTier::LeaseSeen RemoteTier::look_at_lease(const util::Fingerprint& fingerprint) {
    RemoteBackend* backend = lease_backend();
    if (backend == nullptr) return LeaseSeen::kNone;
    const std::string key = backend->lease_key(fingerprint);
    auto reply = backend->server_for(backend->value_key(fingerprint)).command({"GET", key});
    if (!reply || reply->type != RedisReply::Type::kString) return LeaseSeen::kNone;
    return reply->text == kNoValueMarker ? LeaseSeen::kNoValue : LeaseSeen::kHeld;
}

void RemoteTier::count_lease(LeaseState state, bool takeover) noexcept {
    if (state == LeaseState::kWon) RemoteCounters::add(counters_.lease_won);
    if (state == LeaseState::kHeld) RemoteCounters::add(counters_.lease_waited);
    if (state == LeaseState::kWon && takeover) RemoteCounters::add(counters_.lease_takeovers);
}

void RemoteTier::count_lease_wait_timeout() noexcept {
    RemoteCounters::add(counters_.lease_wait_timeouts);
}

void RemoteTier::release(const util::Fingerprint& fingerprint, std::uint64_t id,
                         bool value_there) noexcept {
    if (getpid() != owner_) return;  // the parent's leases are the parent's to release
    HeldLease held;
    {
        std::lock_guard lock(leases_->mutex);
        auto it = leases_->held.find(id);
        if (it == leases_->held.end()) return;
        held = std::move(it->second);
        leases_->held.erase(it);
    }
    // On the backend it was taken on, whatever has happened to the others since.
    RemoteBackend& backend = *held.backend;
    const std::string key = backend.lease_key(fingerprint);
    const std::string ttl = std::to_string(options_.lease_time.count());
    check_script_reply(backend.server_for(backend.value_key(fingerprint))
                           .command({"EVAL", kReleaseScript, "1", key, held.token,
                                     value_there ? "1" : "0", kNoValueMarker, ttl}),
                       backend, "lease release");
}

void RemoteTier::renew_leases() {
    const auto period = options_.lease_time / 3;
    Leases& leases = *leases_;
    std::unique_lock lock(leases.mutex);
    for (;;) {
        leases.changed.wait_for(lock, period, [&] { return leases.stopping; });
        if (leases.stopping) return;
        std::vector<HeldLease> held;
        held.reserve(leases.held.size());
        for (const auto& [id, lease] : leases.held) held.push_back(lease);
        lock.unlock();
        const std::string ttl = std::to_string(options_.lease_time.count());
        for (const HeldLease& lease : held) {
            RemoteBackend& backend = *lease.backend;
            const std::string key = backend.lease_key(lease.fingerprint);
            check_script_reply(backend.server_for(backend.value_key(lease.fingerprint))
                                   .command({"EVAL", kRenewScript, "1", key, lease.token, ttl}),
                               backend, "lease renewal");
        }
        lock.lock();
    }
}

void RemoteTier::stop_renewing() {
    if (getpid() != owner_) {
        // A forked child: the renewing thread is the parent's, never to end here, and what it
        // waits on may be locked or waited on. Both are left as they are.
        if (renewer_.joinable()) new std::thread(std::move(renewer_));
        return;
    }
    {
        std::lock_guard lock(leases_->mutex);
        leases_->stopping = true;
        leases_->changed.notify_all();
    }
    if (renewer_.joinable()) renewer_.join();
}

void RemoteTier::drain_uploads() {
    uploads_->drain();
}

void RemoteTier::finish_uploads(std::chrono::milliseconds grace) {
    if (!uploads_) return;
    const std::size_t dropped = uploads_->finish(grace);
    if (dropped > 0) {
        RemoteCounters::add(counters_.writes_dropped, dropped);
        util::warn_once("remote-dropped",
                        std::to_string(dropped) + " remote upload(s) not sent before the end");
    }
}

}  // namespace kcache::store::remote
