// SPDX-License-Identifier: Apache-2.0
#include "cache/warm_up_bundles.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>

#include "build/plan.hpp"
#include "cache/source_guard.hpp"
#include "util/log.hpp"

namespace kcache::cache {

namespace {

// Runs `each(n)` for every n below `count` on worker threads, never the caller's (a warm-up
// makes nothing on it): `first` at first, and one more each time `patience` passes with items
// left, up to `threads`. A thread that cannot start stops the growth; with none, the caller runs
// them.
template <class Each>
void on_workers(std::size_t count, unsigned first, unsigned threads,
                std::chrono::microseconds patience, Each each) {
    std::atomic<std::size_t> next{0};
    std::mutex mutex;
    std::condition_variable all_done;
    std::size_t done = 0;  // guarded by mutex
    auto work = [&] {
        for (std::size_t n = next.fetch_add(1); n < count; n = next.fetch_add(1)) {
            each(n);
            std::lock_guard lock(mutex);
            if (++done == count) all_done.notify_all();
        }
    };
    const unsigned most = std::max(1u, std::min<unsigned>(threads, static_cast<unsigned>(count)));
    std::vector<std::thread> pool;
    pool.reserve(most);  // no allocation while threads run
    bool can_grow = true;
    auto grow = [&] {
        if (!can_grow || pool.size() >= most || next.load() >= count) return;
        try {
            pool.emplace_back(work);
        } catch (const std::system_error& e) {
            can_grow = false;
            util::log_line(util::LogLevel::kInfo,
                           std::string("warm_up: a worker thread did not start: ") + e.what());
        }
    };
    std::unique_lock lock(mutex);
    for (unsigned n = 0; n < std::max(1u, first); ++n) grow();
    if (pool.empty()) {  // none started: made here after all
        lock.unlock();
        work();
        return;
    }
    while (!all_done.wait_for(lock, patience, [&] { return done == count; })) grow();
    lock.unlock();
    for (std::thread& thread : pool) thread.join();
}

// The bundles of `plans` looked up in the tiers, in order, on up to `threads` threads of their
// own, while the caller takes each as it comes: a bundle's read and check overlap the loads of
// those before it (and a remote tier's round trips overlap each other). Without a thread, the
// caller looks each up as it takes it.
class BundleLookups {
public:
    BundleLookups(store::ArtifactStore& tiers, const std::vector<const build::BundlePlan*>& plans,
                  unsigned threads)
        : tiers_(tiers), plans_(plans), found_(plans.size()), done_(plans.size(), false) {
        const std::size_t most = std::min<std::size_t>({threads, plans.size(), kMostThreads});
        pool_.reserve(most);
        for (std::size_t n = 0; n < most; ++n) {
            try {
                pool_.emplace_back([this] { work(); });
            } catch (const std::system_error& e) {
                util::log_line(
                    util::LogLevel::kInfo,
                    std::string("warm_up: a bundle lookup thread did not start: ") + e.what());
                break;
            }
        }
    }
    ~BundleLookups() {
        next_.store(plans_.size());  // nothing more is taken
        for (std::thread& thread : pool_) thread.join();
    }
    BundleLookups(const BundleLookups&) = delete;
    BundleLookups& operator=(const BundleLookups&) = delete;

    // What the tiers hold for bundle k; waits for its lookup.
    build::FoundBundle take(std::size_t k) {
        if (pool_.empty()) return build::find_bundle(tiers_, *plans_[k]);
        std::unique_lock lock(mutex_);
        found_done_.wait(lock, [&] { return static_cast<bool>(done_[k]); });
        return std::move(found_[k]);
    }

private:
    // A bundle's lookup is a file's read and check: a few threads keep ahead of its loads.
    static constexpr std::size_t kMostThreads = 4;

    void work() {
        for (std::size_t k = next_.fetch_add(1); k < plans_.size(); k = next_.fetch_add(1)) {
            build::FoundBundle found;
            try {
                found = build::find_bundle(tiers_, *plans_[k]);
            } catch (const std::exception& e) {  // not found, then: its members load one by one
                util::log_line(util::LogLevel::kInfo,
                               std::string("warm_up: a bundle lookup failed: ") + e.what());
            }
            std::lock_guard lock(mutex_);
            found_[k] = std::move(found);
            done_[k] = true;
            found_done_.notify_all();
        }
    }

    store::ArtifactStore& tiers_;
    const std::vector<const build::BundlePlan*>& plans_;
    std::atomic<std::size_t> next_{0};
    std::mutex mutex_;
    std::condition_variable found_done_;
    std::vector<build::FoundBundle> found_;  // guarded by mutex_
    std::vector<bool> done_;                 // guarded by mutex_
    std::vector<std::thread> pool_;
};

}  // namespace

WarmUpBundles::WarmUpBundles(LoadedModules& modules, const std::vector<WarmUpItem>& items,
                             const std::vector<std::size_t>& indices, int arch, unsigned threads,
                             std::chrono::microseconds patience)
    : modules_(modules),
      items_(items),
      arch_(arch),
      threads_(threads),
      sources_(items.size()),
      member_(items.size(), false) {
    std::vector<std::optional<Member>> planned(indices.size());
    // Each item a few microseconds (its generator, its hash): a worker for every
    // kItemsPerFirstWorker of them from the start, more only if that falls behind.
    constexpr std::size_t kItemsPerFirstWorker = 16;
    const auto first =
        static_cast<unsigned>((indices.size() + kItemsPerFirstWorker - 1) / kItemsPerFirstWorker);
    on_workers(indices.size(), first, threads, patience, [&](std::size_t n) {
        const std::size_t i = indices[n];
        const WarmUpItem& item = items_[i];
        if (modules_.contains(item.key, arch_)) return;
        sources_[i] = generate_source([&]() -> Result<Source> { return item.make_source(); });
        if (!*sources_[i]) return;
        const Source& made = **sources_[i];
        if (made.kind != SourceKind::kPtx || made.bytes.empty()) return;
        auto plan = build::plan_build(arch_, made, modules_.options.host_compile);
        if (!plan || !*plan) return;  // no host compile: nothing to bundle
        Member& member = planned[n].emplace();
        member.item = i;
        member.fingerprint = (*plan)->fingerprint;
        member.source_bytes = (*plan)->source_bytes;
        member.target = (*plan)->target;
        member.toolchain = std::move((*plan)->key.toolchain);
    });
    for (auto& member : planned) {
        if (!member) continue;
        member_[member->item] = true;
        members_.push_back(std::move(*member));
    }
}

std::optional<Result<Source>> WarmUpBundles::take_source(std::size_t i) {
    if (!sources_[i]) return std::nullopt;
    if (member_[i] || !*sources_[i]) return *sources_[i];
    std::optional<Result<Source>> taken = std::move(sources_[i]);
    sources_[i].reset();
    return taken;
}

std::vector<std::optional<ModuleHandle>> WarmUpBundles::load() {
    std::vector<std::optional<ModuleHandle>> loaded(items_.size());
    // Modules of one target and toolchain link together (sm_90a PTX apart from sm_90 PTX).
    std::map<std::pair<std::string, std::string>, std::vector<const Member*>> groups;
    for (const Member& member : members_) {
        groups[{member.target.name(), member.toolchain}].push_back(&member);
    }
    std::vector<Missing> bundles;
    for (const auto& [group, members] : groups) {
        std::vector<util::Fingerprint> fingerprints;
        fingerprints.reserve(members.size());
        for (const Member* member : members) fingerprints.push_back(member->fingerprint);
        for (const std::vector<std::size_t>& packed : build::pack_bundles(fingerprints)) {
            Missing bundle{{}, members[packed.front()]->target, {}};
            std::vector<util::Fingerprint> planned;
            for (const std::size_t at : packed) {
                bundle.members.push_back(members[at]);
                planned.push_back(members[at]->fingerprint);
            }
            bundle.plan = build::plan_bundle(planned, bundle.target, group.second);
            bundles.push_back(std::move(bundle));
        }
    }
    std::vector<const build::BundlePlan*> plans;
    plans.reserve(bundles.size());
    for (const Missing& bundle : bundles) plans.push_back(&bundle.plan);
    BundleLookups lookups(modules_.tiers(), plans, threads_);
    for (std::size_t k = 0; k < bundles.size(); ++k) {
        Missing& bundle = bundles[k];
        const build::FoundBundle found = lookups.take(k);
        if (found.did_not_link) continue;  // its members load one by one, as ever
        if (!found.artifact) {
            missing_.push_back(std::move(bundle));
            continue;
        }
        std::vector<LoadedModules::BundledKey> keys;
        keys.reserve(bundle.members.size());
        for (const Member* member : bundle.members) {
            keys.push_back(
                {items_[member->item].key, &**sources_[member->item], member->source_bytes});
        }
        auto modules = modules_.load_bundle(bundle.plan, *found.artifact, keys, arch_);
        if (!modules) {
            // Stored, but not loadable here: its members load one by one, and it is not
            // linked again.
            util::log_line(util::LogLevel::kInfo,
                           "bundle " + bundle.plan.fingerprint.hex() +
                               " did not load: " + modules.error().message());
            continue;
        }
        for (std::size_t m = 0; m < keys.size(); ++m) {
            loaded[bundle.members[m]->item] = std::move((*modules)[m]);
        }
    }
    return loaded;
}

void WarmUpBundles::queue_missing(const std::vector<Result<KernelHandle>>& results) noexcept {
    try {
        queue(results);
    } catch (const std::exception& e) {  // the warm-up's results stand; no bundle is no error
        util::log_line(util::LogLevel::kInfo,
                       std::string("warm_up: bundles not queued: ") + e.what());
    }
    missing_.clear();
}

void WarmUpBundles::queue(const std::vector<Result<KernelHandle>>& results) {
    // Linked only for a tier another process reads: a writable disk, or a remote tier.
    const store::DiskStore* disk = modules_.tiers().disk();
    if ((disk == nullptr || disk->read_only()) && modules_.tiers().remote() == nullptr) return;
    for (Missing& bundle : missing_) {
        bool all_loaded = true;
        for (const Member* member : bundle.members) {
            all_loaded = all_loaded && results[member->item].ok();
        }
        if (!all_loaded) continue;  // a member that failed would fail the link too
        BundleBuilder::Job job{std::move(bundle.plan), bundle.target, {}};
        job.ptx.reserve(bundle.members.size());
        for (const Member* member : bundle.members) {
            job.ptx.push_back((*sources_[member->item])->bytes);
        }
        modules_.bundles().add(std::move(job));
    }
}

}  // namespace kcache::cache
