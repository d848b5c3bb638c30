// SPDX-License-Identifier: Apache-2.0
// The remote tier: Redis backends asked in order after memory and disk. One value per
// fingerprint, exactly the disk entry's bytes plus an optional signature trailer, written with
// SET NX so that a good value is never overwritten or mixed with another writer's. A value is
// checked like a disk read (size, checksum, structure, the signature where one is needed); a bad
// one is a counted miss, never loaded. Fail open: no remote error fails a lookup, a compile or a
// load; writes leave the caller's path (upload_queue.hpp).
//
// Across nodes, a lease makes one of them compile what none has: SET <lease> <token> NX PX,
// renewed while its holder compiles and uploads, released by compare-and-delete once the value is
// there. Others wait for the value a bounded time; a crashed holder's lease expires.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kcache/result.hpp"
#include "store/artifact_format.hpp"
#include "store/remote/remote_backend.hpp"
#include "store/remote/remote_config.hpp"
#include "store/remote/remote_stats.hpp"
#include "store/remote/upload_queue.hpp"
#include "util/fingerprint.hpp"

namespace kcache::store::remote {

struct RemoteOptions {
    std::vector<RemoteBackendConfig> backends;
    std::optional<std::string> environment_password;  // KCACHE_REMOTE_PASSWORD
    std::size_t queue_entries = 1024;
    std::uint64_t queue_bytes = std::uint64_t{256} << 20;
    std::chrono::milliseconds exit_grace{2000};
    // A lease lives this long unless renewed (every third of it while its holder works).
    std::chrono::milliseconds lease_time{10000};
    // How long a node waits for the value of a compile another node leads, before compiling it
    // itself.
    std::chrono::milliseconds lease_wait{120000};
};

class RemoteTier;

// A lease this process holds. Released (compare-and-delete) when destroyed, unless handed to
// RemoteTier::put(), which releases it once its value is uploaded.
class Lease {
public:
    Lease() = default;
    Lease(Lease&& other) noexcept;
    Lease& operator=(Lease&& other) noexcept;
    ~Lease();
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    explicit operator bool() const noexcept { return tier_ != nullptr; }
    // Releases it now. Without the value there (a failed compile, a refused upload: what a lease
    // destroyed unreleased assumes) it leaves a marker that sends its waiters to compile at once.
    void release(bool value_there = false) noexcept;

private:
    friend class RemoteTier;

    RemoteTier* tier_ = nullptr;
    util::Fingerprint fingerprint_;
    std::uint64_t id_ = 0;
};

class RemoteTier {
public:
    // An error for a backend that cannot be set up (a password file or key that cannot be read):
    // a configuration error, said by the caller. Connects to nothing yet.
    static Result<std::unique_ptr<RemoteTier>> open(RemoteOptions options);
    // Uploads get the exit grace to drain; what is left is dropped and counted.
    ~RemoteTier();
    RemoteTier(const RemoteTier&) = delete;
    RemoteTier& operator=(const RemoteTier&) = delete;

    // The first good value any backend holds under the fingerprint, checked; null when none has
    // one. Counts bad values (corrupt, signature rejects, too large), not the lookup: the caller
    // may still reject it (key material) and counts the lookup once with count_lookup().
    std::shared_ptr<const VerifiedArtifact> get(const util::Fingerprint& fingerprint);
    void count_lookup(bool hit) noexcept;
    // A value `backend` returned for the fingerprint, checked as get() checks it (size, trailer,
    // signature, checksum and structure); null, counted, when it fails.
    std::shared_ptr<const VerifiedArtifact> check_value(RemoteBackend& backend,
                                                        const util::Fingerprint& fingerprint,
                                                        const RedisReply& reply);
    // What is stored for an entry on `backend`: its bytes, signed if the backend signs.
    static std::string value_for(const RemoteBackend& backend, const util::Fingerprint& fingerprint,
                                 std::string_view entry);
    // Counts the reply to a SET NX (stored, there already, refused; NOPERM makes the backend
    // read-only). False when refused.
    bool count_write(RemoteBackend& backend, const RedisReply& reply);

    // Queues the upload of an entry's bytes to every writable backend (signed where a backend has
    // a signing key); `lease`, if held, is released once it is sent. Never blocks.
    void put(const util::Fingerprint& fingerprint, std::string entry, Lease lease = {});
    // Whether any backend shares disk hits again (`reshare`).
    bool reshares() const noexcept { return reshares_; }
    // Queues a disk hit's bytes for the backends with `reshare` that lack them, once per
    // fingerprint and process. Never blocks.
    void reshare(const util::Fingerprint& fingerprint, std::string_view entry);

    enum class LeaseState : std::uint8_t {
        kWon,      // this process holds it: compile, then put() with it
        kHeld,     // another node holds it: wait_for_value()
        kNoLease,  // no writable backend answered: compile without one
    };
    LeaseState take_lease(const util::Fingerprint& fingerprint, Lease& lease);
    // What stands at another node's lease: nothing (released, expired, or no server to ask), the
    // lease, or the marker of a holder that ended without a value (compile here, at once).
    enum class LeaseSeen : std::uint8_t { kNone, kHeld, kNoValue };
    LeaseSeen look_at_lease(const util::Fingerprint& fingerprint);
    void count_lease(LeaseState state, bool takeover) noexcept;
    void count_lease_wait_timeout() noexcept;

    // Waits until the uploads queued so far are sent (tests, `kcache push`).
    void drain_uploads();
    // Uploads the queue still holds get `grace` to be sent; later puts are dropped (exit).
    void finish_uploads(std::chrono::milliseconds grace);
    // Stops the renewal of held leases (exit: they expire by themselves).
    void stop_renewing();

    RemoteStats stats() const noexcept { return counters_.snapshot(); }
    const std::vector<std::unique_ptr<RemoteBackend>>& backends() const noexcept {
        return backends_;
    }
    std::chrono::milliseconds lease_time() const noexcept { return options_.lease_time; }
    std::chrono::milliseconds lease_wait() const noexcept { return options_.lease_wait; }
    std::chrono::milliseconds exit_grace() const noexcept { return options_.exit_grace; }

private:
    explicit RemoteTier(RemoteOptions options);
    bool send(const Upload& upload);
    // The backend whose lease server decides for the fingerprint: the first writable one.
    RemoteBackend* lease_backend();
    void release(const util::Fingerprint& fingerprint, std::uint64_t id, bool value_there) noexcept;
    void renew_leases();
    // False when this very value (by its digest) was rejected under the fingerprint before.
    bool first_rejection(const util::Fingerprint& fingerprint, const std::string& digest);

    friend class Lease;
    const pid_t owner_;  // the process that opened it: a forked child leaves its thread alone
    RemoteOptions options_;
    mutable RemoteCounters counters_;
    std::vector<std::unique_ptr<RemoteBackend>> backends_;
    std::string token_prefix_;  // host, pid and a random part: whose lease it is

    std::mutex rejected_mutex_;
    // Fingerprint to the SHA-1 of the value last rejected under it; guarded by rejected_mutex_.
    std::map<std::pair<std::uint64_t, std::uint64_t>, std::string> rejected_;

    struct HeldLease {
        util::Fingerprint fingerprint;
        std::string token;
        RemoteBackend* backend = nullptr;  // where it was taken: renewed and released there
    };
    // The leases this process holds, which the renewing thread waits on: on the heap, since a
    // forked child must leave it as it is (destroying a condition variable that a thread of the
    // parent waited on waits for ever).
    struct Leases {
        std::mutex mutex;
        std::condition_variable changed;
        std::map<std::uint64_t, HeldLease> held;  // guarded by mutex
        std::uint64_t next_id = 1;                // guarded by mutex
        bool stopping = false;                    // guarded by mutex
    };
    std::unique_ptr<Leases> leases_ = std::make_unique<Leases>();
    bool reshares_ = false;
    std::mutex reshared_mutex_;
    std::set<std::pair<std::uint64_t, std::uint64_t>> reshared_;  // guarded by reshared_mutex_
    std::thread renewer_;

    std::unique_ptr<UploadQueue> uploads_;  // last: its thread calls send()
};

}  // namespace kcache::store::remote
