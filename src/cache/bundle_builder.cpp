// SPDX-License-Identifier: Apache-2.0
#include "cache/bundle_builder.hpp"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <system_error>
#include <utility>

#include "store/disk_store.hpp"
#include "util/log.hpp"

namespace kcache::cache {

BundleBuilder::BundleBuilder(std::shared_ptr<store::ArtifactStore> tiers, MakeEntry make_entry,
                             std::chrono::milliseconds delay)
    : tiers_(std::move(tiers)), make_entry_(std::move(make_entry)), delay_(delay) {}

BundleBuilder::~BundleBuilder() {
    stop();
}

void BundleBuilder::add(Job job) {
    std::lock_guard lock(mutex_);
    // A bundle's link and its members' entries are two jobs of their own.
    const std::string id = (job.entries.empty() ? "" : "entries of ") + job.plan.fingerprint.hex();
    if (stopping_ || (!job.entries.empty() && !make_entry_) || !seen_.insert(id).second) return;
    job.not_before = std::chrono::steady_clock::now() + delay_;
    queue_.push_back(std::move(job));
    // One thread more only when none is idle: a warm-up queues a job for each bundle it loaded,
    // and its caller should not wait for threads to start. A thread that takes a job starts
    // the others the queue wants (work()).
    if (threads_.size() == running_) grow(std::min(kThreads, threads_.size() + 1));
    if (threads_.empty()) {
        queue_.pop_back();  // nobody would take it
        return;
    }
    work_.notify_one();
}

void BundleBuilder::start_idle() {
    std::lock_guard lock(mutex_);
    if (stopping_ || !threads_.empty()) return;
    try {
        threads_.emplace_back([this] { work(); });
        ++started_;
    } catch (const std::system_error& e) {  // add() tries again
        util::log_line(util::LogLevel::kInfo,
                       std::string("bundles: a linking thread did not start: ") + e.what());
    }
}

void BundleBuilder::grow(std::size_t most) {
    // A thread more while there are fewer than jobs waiting: each job is long.
    while (threads_.size() < most && threads_.size() - running_ < queue_.size()) {
        try {
            threads_.emplace_back([this] { work(); });
            ++started_;
        } catch (const std::system_error& e) {
            util::log_line(util::LogLevel::kInfo,
                           std::string("bundles: a linking thread did not start: ") + e.what());
            return;
        }
    }
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
        grow(kThreads);  // more jobs waiting than idle threads: another thread
        lock.unlock();
        if (!job.entries.empty()) {
            make_entries(job);
            lock.lock();
        } else {
            Outcome outcome = Outcome::kFailed;
            try {  // nothing may leave this thread
                outcome = link(job);
            } catch (const std::exception& e) {
                util::log_line(util::LogLevel::kInfo,
                               "bundle " + job.plan.fingerprint.hex() + " not made: " + e.what());
            }
            lock.lock();
            ++(outcome == Outcome::kBuilt    ? built_
               : outcome == Outcome::kFailed ? failed_
                                             : skipped_);
        }
        --running_;
        done_.notify_all();
    }
}

BundleBuilder::Outcome BundleBuilder::link(const Job& job) {
    const std::string what = "bundle " + job.plan.fingerprint.hex() + " of " +
                             std::to_string(job.ptx.size()) + " PTX modules";
    std::vector<const std::string*> ptx;
    ptx.reserve(job.ptx.size());
    for (const std::string& module : job.ptx) ptx.push_back(&module);
    const Result<build::BundleLink> linked = build::link_bundle(*tiers_, job.plan, ptx, job.target);
    if (!linked) {
        util::log_line(util::LogLevel::kInfo, what + " not made: " + linked.error().message());
        return Outcome::kFailed;
    }
    switch (*linked) {
        case build::BundleLink::kLinked:
            KCACHE_LOG(kInfo, what + " stored");
            return Outcome::kBuilt;
        case build::BundleLink::kAnotherLinks:
            KCACHE_LOG(kDebug, what + ": another process links it");
            break;
        case build::BundleLink::kStoredAlready:
            KCACHE_LOG(kDebug, what + ": stored already");
            break;
        case build::BundleLink::kDidNotLinkBefore:
            KCACHE_LOG(kDebug, what + ": did not link before");
            break;
    }
    return Outcome::kSkipped;
}

bool BundleBuilder::on_disk(const MemberEntry& member) const {
    const store::DiskStore* disk = tiers_->disk();
    std::error_code error;  // a file's stat
    return disk != nullptr && std::filesystem::exists(disk->path_of(member.fingerprint), error);
}

void BundleBuilder::make_entries(const Job& job) {
    for (const MemberEntry& member : job.entries) {
        if (on_disk(member)) continue;  // made before: the usual case after a warm start
        std::string why;
        try {  // nothing may leave this thread: a later kernel() compiles the key instead
            const Result<void> entry = make_entry_(member.key, member.source, job.arch);
            if (entry) continue;
            why = entry.error().message();
        } catch (const std::exception& e) {
            why = e.what();
        }
        util::log_line(util::LogLevel::kInfo, "the entry of '" + member.key + "' (bundle " +
                                                  job.plan.fingerprint.hex() +
                                                  ") was not made: " + why);
    }
}

void BundleBuilder::drain() {
    std::unique_lock lock(mutex_);
    ++draining_;
    work_.notify_all();
    done_.wait(lock, [&] { return stopping_ || (queue_.empty() && running_ == 0); });
    --draining_;
}

void BundleBuilder::finish() {
    {
        std::unique_lock lock(mutex_);
        // Links not started are dropped; members' entries are made now, their delays skipped.
        std::erase_if(queue_, [](const Job& job) { return job.entries.empty(); });
        // Entries the disk tier has (a warm-up that loaded bundles queues all their members') need
        // no thread: after a warm start, none starts here.
        for (Job& job : queue_)
            std::erase_if(job.entries, [&](const MemberEntry& member) { return on_disk(member); });
        std::erase_if(queue_, [](const Job& job) { return job.entries.empty(); });
        if (!queue_.empty() && !stopping_) {
            // Nothing else runs in this cache any more: every core makes them.
            grow(std::max<std::size_t>(kThreads, std::thread::hardware_concurrency()));
            ++draining_;
            work_.notify_all();
            done_.wait(lock, [&] { return stopping_ || (queue_.empty() && running_ == 0); });
            --draining_;
        }
    }
    stop();
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

std::size_t BundleBuilder::threads_started() const {
    std::lock_guard lock(mutex_);
    return started_;
}

}  // namespace kcache::cache
