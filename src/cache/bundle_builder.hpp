// SPDX-License-Identifier: Apache-2.0
// Links bundles (build/bundle.hpp) on threads of its own, after the warm-ups that asked for them:
// a bundle's link takes about as long as compiling its members again, and nobody waits for it.
// A job waits `delay` before its link starts: a process that ends soon after its warm-up (a
// script, a test) links nothing, and its end waits for no link; the next warm-up of the same
// modules queues them again. Across processes sharing a disk tier, the one holding the lock
// beside a bundle's entry links it; the others skip it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "build/bundle.hpp"
#include "compile/compiler.hpp"
#include "store/artifact_store.hpp"

namespace kcache::cache {

class BundleBuilder {
public:
    struct Job {
        build::BundlePlan plan;
        compile::Target target;
        std::vector<std::string> ptx;                        // the members', in the plan's order
        std::chrono::steady_clock::time_point not_before{};  // set by add()
    };

    // Threads that link at once, at most: each link is one thread's work.
    static constexpr std::size_t kThreads = 4;
    static constexpr std::chrono::milliseconds kDelay{2000};

    explicit BundleBuilder(std::shared_ptr<store::ArtifactStore> tiers,
                           std::chrono::milliseconds delay = kDelay);
    ~BundleBuilder();  // stop()
    BundleBuilder(const BundleBuilder&) = delete;
    BundleBuilder& operator=(const BundleBuilder&) = delete;

    // Queued, unless this process queued the same bundle before (one that did not link is not
    // tried again) or stop() came.
    void add(Job job);
    // Until every job queued so far is done, their delays skipped.
    void drain();
    // Jobs not started are dropped; the links running end first.
    void stop();

    std::size_t built() const;    // bundles stored
    std::size_t failed() const;   // links or stores that failed (logged)
    std::size_t skipped() const;  // another process links them, or stored them already

private:
    enum class Outcome { kBuilt, kFailed, kSkipped };
    void work();
    Outcome link(const Job& job);

    const std::shared_ptr<store::ArtifactStore> tiers_;
    const std::chrono::milliseconds delay_;
    mutable std::mutex mutex_;
    std::condition_variable work_;          // a job came, or stop()
    std::condition_variable done_;          // a job ended, or stop()
    std::deque<Job> queue_;                 // guarded by mutex_
    std::unordered_set<std::string> seen_;  // bundles' fingerprints (hex), guarded by mutex_
    std::vector<std::thread> threads_;      // guarded by mutex_
    std::size_t running_ = 0, built_ = 0, failed_ = 0, skipped_ = 0;  // guarded by mutex_
    bool stopping_ = false;                                           // guarded by mutex_
    std::size_t draining_ = 0;  // drain() calls waiting: no delay; guarded by mutex_
};

}  // namespace kcache::cache
