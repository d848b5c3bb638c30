// SPDX-License-Identifier: Apache-2.0
// Links bundles (build/bundle.hpp) on threads of its own, after the warm-ups that asked for them:
// a bundle's link takes about as long as compiling its members again, and nobody waits for it.
// The same threads compile the own entries of the members of a bundle a warm-up linked first or
// loaded, where the disk lacks them (warm_up_bundles.hpp), so that kernel() finds each key's entry
// in a later process too. A job waits `delay` before it starts: a process that ends soon after its
// warm-up (a script, a test) links nothing, and its end waits for no link; the next warm-up of the
// same modules queues them again. A cache's end makes the members' entries first, though (until a
// later warm-up loads their bundle, kernel() would compile those keys); a process's exit does not.
// Across processes sharing a disk tier, the one holding the lock beside a bundle's entry links
// it; the others skip it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "build/bundle.hpp"
#include "compile/compiler.hpp"
#include "kcache/source.hpp"
#include "store/artifact_store.hpp"
#include "util/fingerprint.hpp"

namespace kcache::cache {

class BundleBuilder {
public:
    // A member of a bundle: its key and source, for an entry of its own, and that entry's
    // fingerprint (one the disk tier has is not made again).
    struct MemberEntry {
        std::string key;
        Source source;
        util::Fingerprint fingerprint{};
    };
    struct Job {
        build::BundlePlan plan;
        compile::Target target;
        std::vector<std::string> ptx;  // to link: the members', in the plan's order
        // Instead, for a bundle a warm-up linked first or loaded: its members whose entries the
        // disk tier lacks, each compiled alone (for `arch`) and stored.
        std::vector<MemberEntry> entries;
        int arch = 0;
        std::chrono::steady_clock::time_point not_before{};  // set by add()
    };
    // Makes and stores `key`'s own entry of `source` for `arch`, unless a tier has it.
    using MakeEntry =
        std::function<Result<void>(std::string_view key, const Source& source, int arch)>;

    // Threads that link at once, at most: each link is one thread's work. finish() makes the
    // members' entries left on every core.
    static constexpr std::size_t kThreads = 4;
    static constexpr std::chrono::milliseconds kDelay{2000};

    explicit BundleBuilder(std::shared_ptr<store::ArtifactStore> tiers, MakeEntry make_entry = {},
                           std::chrono::milliseconds delay = kDelay);
    ~BundleBuilder();  // stop()
    BundleBuilder(const BundleBuilder&) = delete;
    BundleBuilder& operator=(const BundleBuilder&) = delete;

    // Queued, unless this process queued the same bundle before (one that did not link is not
    // tried again) or stop() came.
    void add(Job job);
    // One thread, waiting for jobs, where none has started: called from a thread other than the
    // one that will add them (a warm-up's planner, beside the loads), so that add() on the
    // caller's path finds it idle and starts none.
    void start_idle();
    // Until every job queued so far is done, their delays skipped.
    void drain();
    // Jobs not started are dropped; those running end first. At a process's exit (static
    // destruction under way: a compile could read what is gone), and after finish().
    void stop();
    // stop(), once the members' entries queued are made, on every core (without them, kernel()
    // in a later process would compile their keys again): a cache's end.
    void finish();

    std::size_t built() const;    // bundles stored
    std::size_t failed() const;   // links or stores that failed (logged)
    std::size_t skipped() const;  // another process links them, or stored them already
    std::size_t threads_started() const;

private:
    enum class Outcome { kBuilt, kFailed, kSkipped };
    void work();
    // Whether the disk tier has the member's own entry.
    bool on_disk(const MemberEntry& member) const;
    // Starts threads, up to `most`, while fewer wait than jobs do; requires mutex_.
    void grow(std::size_t most);
    Outcome link(const Job& job);
    void make_entries(const Job& job);  // logs those that fail

    const std::shared_ptr<store::ArtifactStore> tiers_;
    const MakeEntry make_entry_;
    const std::chrono::milliseconds delay_;
    mutable std::mutex mutex_;
    std::condition_variable work_;          // a job came, or stop()
    std::condition_variable done_;          // a job ended, or stop()
    std::deque<Job> queue_;                 // guarded by mutex_
    std::unordered_set<std::string> seen_;  // bundles' fingerprints (hex), guarded by mutex_
    std::vector<std::thread> threads_;      // guarded by mutex_
    std::size_t running_ = 0, built_ = 0, failed_ = 0, skipped_ = 0;  // guarded by mutex_
    std::size_t started_ = 0;                                         // guarded by mutex_
    bool stopping_ = false;                                           // guarded by mutex_
    std::size_t draining_ = 0;  // drain() calls waiting: no delay; guarded by mutex_
};

}  // namespace kcache::cache
