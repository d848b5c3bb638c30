// SPDX-License-Identifier: Apache-2.0
#include "cache/bundle_builder.hpp"

#include <optional>
#include <system_error>
#include <utility>

#include "util/log.hpp"

namespace kcache::cache {

BundleBuilder::BundleBuilder(std::shared_ptr<store::ArtifactStore> tiers,
                             std::chrono::milliseconds delay)
    : tiers_(std::move(tiers)), delay_(delay) {}

BundleBuilder::~BundleBuilder() {
    stop();
}

void BundleBuilder::add(Job job) {
    std::lock_guard lock(mutex_);
    if (stopping_ || !seen_.insert(job.plan.fingerprint.hex()).second) return;
    job.not_before = std::chrono::steady_clock::now() + delay_;
    queue_.push_back(std::move(job));
    // A thread more while there are fewer than jobs waiting: each link is long.
    if (threads_.size() < kThreads && threads_.size() - running_ < queue_.size()) {
        try {
            threads_.emplace_back([this] { work(); });
        } catch (const std::system_error& e) {
            util::log_line(util::LogLevel::kInfo,
                           std::string("bundles: a linking thread did not start: ") + e.what());
            if (threads_.empty()) {
                queue_.pop_back();  // nobody would take it
                return;
            }
        }
    }
    work_.notify_one();
}

void BundleBuilder::work() {
    std::unique_lock lock(mutex_);
    for (;;) {
        work_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (stopping_) return;
        // Jobs are queued in the order of their delays: the first is due first.
        if (const auto due = queue_.front().not_before;
            draining_ == 0 && std::chrono::steady_clock::now() < due) {
            work_.wait_until(lock, due);
            continue;
        }
        Job job = std::move(queue_.front());
        queue_.pop_front();
        ++running_;
        lock.unlock();
        const Outcome outcome = link(job);
        lock.lock();
        --running_;
        ++(outcome == Outcome::kBuilt ? built_ : outcome == Outcome::kFailed ? failed_ : skipped_);
        done_.notify_all();
    }
}

BundleBuilder::Outcome BundleBuilder::link(const Job& job) {
    const std::string what = "bundle " + job.plan.fingerprint.hex() + " of " +
                             std::to_string(job.ptx.size()) + " PTX modules";
    // One process links a bundle: the lock beside its entry, not waited for. Its holder links it;
    // a holder before it may have stored it.
    std::optional<util::FileLock> held;
    if (store::DiskStore* disk = tiers_->disk(); disk != nullptr && !disk->read_only()) {
        held = disk->lock(job.plan.fingerprint, std::chrono::milliseconds(0));
        if (!held) {
            KCACHE_LOG(kDebug, what + ": another process links it");
            return Outcome::kSkipped;
        }
        if (const build::FoundBundle found = build::find_bundle(*tiers_, job.plan);
            found.artifact || found.did_not_link) {
            KCACHE_LOG(kDebug,
                       what + (found.artifact ? ": stored already" : ": did not link before"));
            return Outcome::kSkipped;
        }
    }
    std::vector<const std::string*> ptx;
    ptx.reserve(job.ptx.size());
    for (const std::string& module : job.ptx) ptx.push_back(&module);
    const Result<void> made = build::make_bundle(*tiers_, job.plan, ptx, job.target);
    if (!made) {
        util::log_line(util::LogLevel::kInfo, what + " not made: " + made.error().message());
        return Outcome::kFailed;
    }
    KCACHE_LOG(kInfo, what + " stored");
    return Outcome::kBuilt;
}

void BundleBuilder::drain() {
    std::unique_lock lock(mutex_);
    ++draining_;
    work_.notify_all();
    done_.wait(lock, [&] { return stopping_ || (queue_.empty() && running_ == 0); });
    --draining_;
}

void BundleBuilder::stop() {
    std::vector<std::thread> threads;
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
        queue_.clear();
        threads.swap(threads_);
    }
    work_.notify_all();
    done_.notify_all();
    for (std::thread& thread : threads) thread.join();
}

std::size_t BundleBuilder::built() const {
    std::lock_guard lock(mutex_);
    return built_;
}

std::size_t BundleBuilder::failed() const {
    std::lock_guard lock(mutex_);
    return failed_;
}

std::size_t BundleBuilder::skipped() const {
    std::lock_guard lock(mutex_);
    return skipped_;
}

}  // namespace kcache::cache
