// SPDX-License-Identifier: Apache-2.0
// One compile per fingerprint: threads of this process through single flight, processes through
// a lock file beside the disk entry, nodes through a lease in the remote tier. Whoever waited
// looks in the tiers again.
#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "build/artifact_builder.hpp"
#include "build/compile_step.hpp"
#include "build/store_step.hpp"
#include "build/tier_lookup.hpp"
#include "util/elapsed.hpp"
#include "util/log.hpp"
#include "util/try.hpp"

namespace kcache::build {
namespace {

// Key material is line-based text; a caller's key may contain anything.
std::string one_line(std::string_view key) {
    std::string line(key);
    for (char& c : line) {
        if (c == '\n' || c == '\r') c = ' ';
    }
    return line;
}

// How often a node waiting for another's compile asks for its value: soon at first (most kernels
// compile quickly), then less often.
constexpr std::chrono::milliseconds kFirstPoll{20};
constexpr std::chrono::milliseconds kMaxPoll{250};

}  // namespace

std::optional<BuiltArtifact> ArtifactBuilder::lead_or_wait(std::string_view key,
                                                           const BuildPlan& plan,
                                                           const Source& source, bool& rejected,
                                                           store::remote::Lease& lease) {
    using LeaseState = store::remote::RemoteTier::LeaseState;
    store::remote::RemoteTier& remote = *tiers_->remote();
    const auto give_up = std::chrono::steady_clock::now() + remote.lease_wait();
    bool waited = false;
    bool takeover = false;
    for (;;) {
        const LeaseState state = remote.take_lease(plan.fingerprint, lease);
        if (state == LeaseState::kWon) {
            // The holder before may have uploaded its value and released its lease between this
            // node's last look and now: looked for once more, the lease held.
            if (auto hit = find_in_tiers(*tiers_, key, plan, source, rejected)) {
                lease.release(/*value_there=*/true);
                return hit;
            }
        }
        if (state != LeaseState::kHeld) {
            remote.count_lease(state, takeover);
            return std::nullopt;  // lead the compile (or compile without a lease)
        }
        if (!waited) remote.count_lease(state, false);
        waited = true;
        // Another node compiles it: wait for its value while its lease stands.
        auto poll = kFirstPoll;
        for (;;) {
            std::this_thread::sleep_for(poll);
            poll = std::min(poll * 2, kMaxPoll);
            if (auto hit = find_in_tiers(*tiers_, key, plan, source, rejected)) return hit;
            if (std::chrono::steady_clock::now() >= give_up) {
                remote.count_lease_wait_timeout();
                KCACHE_LOG(kInfo, "waited " + std::to_string(remote.lease_wait().count()) +
                                      " ms for another node's compile of " + one_line(key) +
                                      "; compiling it here");
                return std::nullopt;
            }
            const auto seen = remote.look_at_lease(plan.fingerprint);
            if (seen == store::remote::RemoteTier::LeaseSeen::kNoValue) {
                // Its holder ended without a value (a failed compile, a refused upload): every
                // waiter compiles now rather than take the lease over one after another.
                return std::nullopt;
            }
            if (seen == store::remote::RemoteTier::LeaseSeen::kNone) break;
        }
        // The lease is gone: released with the value uploaded, or expired with its holder.
        if (auto hit = find_in_tiers(*tiers_, key, plan, source, rejected)) return hit;
        takeover = true;
    }
}

Result<BuiltArtifact> ArtifactBuilder::build_once(std::string_view key, const BuildPlan& plan,
                                                  const Source& source, bool& rejected,
                                                  Asking asking) {
    if (auto hit = find_in_tiers(*tiers_, key, plan, source, rejected)) return std::move(*hit);

    const std::string flight_id = plan.fingerprint.hex();
    auto ticket = flights_.join(flight_id);
    if (!ticket.leader) {
        if (auto error = ticket.flight->wait()) return *error;
        if (auto hit = find_in_tiers(*tiers_, key, plan, source, rejected)) return std::move(*hit);
        // Not kept in a tier (too big for memory, and no disk): the leader's own result.
        if (auto value = std::static_pointer_cast<const BuiltArtifact>(ticket.flight->value())) {
            BuiltArtifact shared = *value;
            shared.provenance = Provenance::kMemoryTier;
            shared.compile_ns = 0;
            return shared;
        }
        return compile_and_store(key, plan, source, rejected, asking);
    }
    util::SingleFlight::Landing landing(flights_, flight_id, ticket.flight);
    auto built = compile_and_store(key, plan, source, rejected, asking);
    if (built) {
        // For waiters the tiers cannot serve; one copy of a cubin per compile, small beside it.
        landing.succeed(std::make_shared<const BuiltArtifact>(*built));
    } else {
        landing.fail(built.error());
    }
    return built;
}

Result<BuiltArtifact> ArtifactBuilder::compile_and_store(std::string_view key,
                                                         const BuildPlan& plan,
                                                         const Source& source, bool& rejected,
                                                         Asking asking) {
    // Across processes: one compiles, the others wait on the lock and then find its result.
    // Held until the artifact is stored; without the lock in time, compile privately. A holder
    // that stops stamping its lock (stopped, hung) is not waited for: FileLock gives up after a
    // few heartbeats and says whom it waited for; a duplicate compile is safe.
    store::DiskStore* disk = tiers_->disk();
    std::optional<util::FileLock> lock;
    if (disk != nullptr) {
        const auto asked = std::chrono::steady_clock::now();
        lock = disk->lock(plan.fingerprint, std::chrono::minutes(2));
        if (lock) {
            if (auto hit = find_in_tiers(*tiers_, key, plan, source, rejected)) {
                return std::move(*hit);
            }
        } else {
            KCACHE_LOG(kInfo,
                       "no compile lock for " + one_line(key) + " (" + plan.fingerprint.hex() +
                           ") after " +
                           std::to_string(util::elapsed_since<std::chrono::milliseconds>(asked)) +
                           " ms; compiling without it");
        }
    }

    // Across nodes: one leads the compile under a lease, the others wait for its value.
    store::remote::Lease lease;
    if (tiers_->remote() != nullptr) {
        if (auto hit = lead_or_wait(key, plan, source, rejected, lease)) return std::move(*hit);
    }

    const std::string caller_key = one_line(key);
    explain_miss(tiers_.get(), caller_key, plan);
    const auto start = std::chrono::steady_clock::now();
    TRY_ASSIGN(std::optional<compile::Compiled> compiled,
               compile_planned(source, plan, workers_.get()));
    const std::uint64_t compile_ns = util::elapsed_since(start);
    if (!compiled) {  // nvJitLink cannot be used: the driver's JIT takes the PTX
        BuiltArtifact for_the_driver;
        for_the_driver.loadable = source;
        return for_the_driver;
    }
    // Once stored, the processes waiting on the lock can go; a due cleanup runs after they do.
    // A lookup's caller needs only the cubin, which the memory tier holds at once: the durable
    // write, the lock's release and the cleanup go behind it.
    auto held = std::make_shared<std::optional<util::FileLock>>(std::move(lock));
    auto stored = [held, disk] {
        held->reset();
        if (disk != nullptr) disk->run_pending_cleanup();
    };
    const auto writing = asking == Asking::kLookup ? store::ArtifactStore::Writing::kBehind
                                                   : store::ArtifactStore::Writing::kNow;
    BuiltArtifact built = store_compiled(tiers_.get(), caller_key, plan, source,
                                         std::move(*compiled), std::move(lease), writing, stored);
    built.compile_ns = compile_ns;
    return built;
}

}  // namespace kcache::build
