// SPDX-License-Identifier: Apache-2.0
#include "cache/warm_up_bundles.hpp"

#include <algorithm>
#include <chrono>
#include <exception>
#include <iterator>
#include <map>
#include <system_error>
#include <thread>
#include <utility>

#include "build/plan.hpp"
#include "cache/source_guard.hpp"
#include "cache/warm_up_runners.hpp"
#include "util/log.hpp"

namespace kcache::cache {

namespace {

// What the tiers hold for a bundle; nothing if the lookup failed (its members load one by one).
build::FoundBundle look_up(store::ArtifactStore& tiers, const build::BundlePlan& plan) {
    try {
        return build::find_bundle(tiers, plan);
    } catch (const std::exception& e) {
        util::log_line(util::LogLevel::kInfo,
                       std::string("warm_up: a bundle lookup failed: ") + e.what());
        return {};
    }
}

// Workers to start at once for `count` items of a few microseconds each (a generator and a hash,
// a lookup that misses): one for every kItemsPerFirstWorker, more only if that falls behind.
unsigned first_workers(std::size_t count) {
    constexpr std::size_t kItemsPerFirstWorker = 16;
    return static_cast<unsigned>((count + kItemsPerFirstWorker - 1) / kItemsPerFirstWorker);
}

}  // namespace

WarmUpBundles::WarmUpBundles(LoadedModules& modules, const std::vector<WarmUpItem>& items,
                             const std::vector<std::size_t>& indices, int arch, unsigned threads,
                             std::chrono::microseconds patience)
    : modules_(modules),
      items_(items),
      arch_(arch),
      threads_(threads),
      patience_(patience),
      sources_(items.size()),
      member_(items.size(), false) {
    std::vector<std::optional<Member>> planned(indices.size());
    auto plan_all = [&](unsigned first, std::chrono::microseconds grow_after) {
        on_workers(indices.size(), first, threads, grow_after, [&](std::size_t n) {
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
    };
    // The bundles the last warm-up of these keys planned load while this one plans its own, on a
    // thread of its own; without a record, or that thread, the plan comes first. Beside the loads
    // the plan starts with one worker, more only if it falls behind: it is short beside them, and
    // each thread started costs the loading thread too (the process's memory map is shared), so
    // it grows with more patience than a plan the loads wait for.
    std::vector<std::string_view> keys;
    keys.reserve(indices.size());
    for (const std::size_t i : indices) keys.push_back(items_[i].key);
    record_ = build::plan_warm_up_record(keys, arch_);
    recorded_ = read_record(indices.size());
    std::thread planner;
    std::exception_ptr planning_failed;  // thrown here, once the planner has ended
    if (!recorded_.empty()) {
        try {
            planner = std::thread([&] {
                try {
                    // The bundles loaded will queue their members' entries (queue_missing): the
                    // thread that takes them starts here, not on the caller's path after the loads.
                    if (tiers_shared()) modules_.bundles().start_idle();
                    plan_all(1, kPlanPatienceBesideLoads);
                } catch (...) {
                    planning_failed = std::current_exception();
                }
            });
        } catch (const std::system_error& e) {
            util::log_line(util::LogLevel::kInfo,
                           std::string("warm_up: a planning thread did not start: ") + e.what());
        }
    }
    if (planner.joinable()) {
        load_ahead(recorded_);
        planner.join();
        if (planning_failed) std::rethrow_exception(planning_failed);
    } else {
        plan_all(first_workers(indices.size()), patience_);
    }
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
    std::vector<Bundle> bundles;
    for (const auto& [group, members] : groups) {
        std::vector<util::Fingerprint> fingerprints;
        fingerprints.reserve(members.size());
        for (const Member* member : members) fingerprints.push_back(member->fingerprint);
        for (const std::vector<std::size_t>& packed : build::pack_bundles(fingerprints)) {
            Bundle bundle{{}, members[packed.front()]->target, {}};
            std::vector<util::Fingerprint> planned;
            for (const std::size_t at : packed) {
                bundle.members.push_back(members[at]);
                planned.push_back(members[at]->fingerprint);
            }
            bundle.plan = build::plan_bundle(planned, bundle.target, group.second);
            bundles.push_back(std::move(bundle));
        }
    }
    // A bundle loaded ahead is checked as a lookup's would be, here, without reading it again;
    // only the others are looked up, on threads that start only if some are left.
    std::vector<const LoadedAhead*> loaded_ahead(bundles.size(), nullptr);  // by bundle
    std::vector<std::size_t> to_look_up;                                    // into bundles
    std::vector<util::Fingerprint> planned;  // the record this warm-up leaves
    planned.reserve(bundles.size());
    for (std::size_t k = 0; k < bundles.size(); ++k) {
        const util::Fingerprint& fingerprint = bundles[k].plan.fingerprint;
        if (const auto at = ahead_.find(fingerprint); at != ahead_.end()) {
            loaded_ahead[k] = &at->second;
        } else {
            to_look_up.push_back(k);
        }
        planned.push_back(fingerprint);
    }
    Ahead<build::FoundBundle> lookups(
        to_look_up.size(), std::min<std::size_t>(threads_, kLookupThreads),
        /*caller_helps=*/true,
        [&](std::size_t n) { return look_up(modules_.tiers(), bundles[to_look_up[n]].plan); });
    for (std::size_t k = 0, looked_up = 0; k < bundles.size(); ++k) {
        const LoadedAhead* ahead = loaded_ahead[k];
        const build::FoundBundle found =
            ahead != nullptr ? build::bundle_found(modules_.tiers(), bundles[k].plan, ahead->found)
                             : lookups.take(looked_up++);
        if (found.did_not_link) continue;  // its members load one by one, as ever
        if (!found.artifact) {
            missing_.push_back(std::move(bundles[k]));
            continue;
        }
        if (ahead != nullptr && ahead->code == nullptr) continue;  // the driver refused it
        if (load_found(bundles[k], *found.artifact, std::nullopt, loaded,
                       ahead != nullptr ? ahead->code : nullptr)) {
            with_entries_.push_back(std::move(bundles[k]));
        }
    }
    ahead_.clear();  // the code loaded ahead that no planned bundle names is unloaded
    record(planned);
    link_first(loaded);
    return loaded;
}

bool WarmUpBundles::load_found(const Bundle& bundle, const store::Found& found,
                               std::optional<std::chrono::nanoseconds> linked_in,
                               std::vector<std::optional<ModuleHandle>>& loaded,
                               std::shared_ptr<const SharedCode> code) {
    std::vector<LoadedModules::BundledKey> keys;
    keys.reserve(bundle.members.size());
    for (const Member* member : bundle.members) {
        keys.push_back({items_[member->item].key, &**sources_[member->item], member->source_bytes});
    }
    auto modules =
        modules_.load_bundle(bundle.plan, found, keys, arch_, linked_in, std::move(code));
    if (!modules) {
        // Stored, but not loadable here: its members load one by one, and it is not linked
        // again.
        util::log_line(util::LogLevel::kInfo, "bundle " + bundle.plan.fingerprint.hex() +
                                                  " did not load: " + modules.error().message());
        return false;
    }
    for (std::size_t m = 0; m < keys.size(); ++m) {
        loaded[bundle.members[m]->item] = std::move((*modules)[m]);
    }
    return true;
}

bool WarmUpBundles::tiers_shared() const {
    const store::DiskStore* disk = modules_.tiers().disk();
    return (disk != nullptr && !disk->read_only()) || modules_.tiers().remote() != nullptr;
}

void WarmUpBundles::link_first(std::vector<std::optional<ModuleHandle>>& loaded) {
    const std::size_t enough = kLinkFirstBundlesPerThread * std::max(1u, threads_);
    if (missing_.size() < enough || !tiers_shared()) return;
    // Only bundles none of whose members has an entry of its own in a tier: one that has would
    // be compiled again here, where loading its entry costs far less.
    std::vector<std::pair<std::size_t, const Member*>> members;  // (bundle, member)
    for (std::size_t k = 0; k < missing_.size(); ++k) {
        for (const Member* member : missing_[k].members) members.emplace_back(k, member);
    }
    std::vector<std::atomic<bool>> stored(missing_.size());
    on_workers(
        members.size(), first_workers(members.size()), threads_, patience_, [&](std::size_t n) {
            const auto [k, member] = members[n];
            if (stored[k].load(std::memory_order_relaxed)) return;
            try {
                if (modules_.tiers().find(member->fingerprint)) stored[k] = true;
            } catch (const std::exception& e) {  // as if it had one: no link first for its bundle
                stored[k] = true;
                util::log_line(util::LogLevel::kInfo,
                               std::string("warm_up: an entry's lookup failed: ") + e.what());
            }
        });
    std::vector<Bundle> first, later;
    for (std::size_t k = 0; k < missing_.size(); ++k) {
        (stored[k] ? later : first).push_back(std::move(missing_[k]));
    }
    missing_ = std::move(later);
    if (first.size() < enough) {
        missing_.insert(missing_.end(), std::make_move_iterator(first.begin()),
                        std::make_move_iterator(first.end()));
        return;
    }
    // Each link on a worker, loaded here as it ends; a bundle not linked (another process links
    // it, or its members do not link together) leaves its members to load one by one.
    struct Linked {
        std::optional<store::Found> artifact;
        std::optional<std::chrono::nanoseconds> linked_in;  // linked here, in that time
    };
    Ahead<Linked> links(
        first.size(), threads_, /*caller_helps=*/false, [&](std::size_t k) -> Linked {
            const Bundle& bundle = first[k];
            const std::string what = "bundle " + bundle.plan.fingerprint.hex();
            try {
                std::vector<const std::string*> ptx;
                ptx.reserve(bundle.members.size());
                for (const Member* member : bundle.members) {
                    ptx.push_back(&(*sources_[member->item])->bytes);
                }
                const auto start = std::chrono::steady_clock::now();
                const Result<build::BundleLink> linked =
                    build::link_bundle(modules_.tiers(), bundle.plan, ptx, bundle.target);
                const auto took = std::chrono::steady_clock::now() - start;
                if (!linked) {
                    util::log_line(util::LogLevel::kInfo,
                                   what + " not made: " + linked.error().message());
                    return {};
                }
                if (*linked != build::BundleLink::kLinked &&
                    *linked != build::BundleLink::kStoredAlready) {
                    return {};
                }
                Linked out{look_up(modules_.tiers(), bundle.plan).artifact, std::nullopt};
                if (*linked == build::BundleLink::kLinked) out.linked_in = took;
                return out;
            } catch (const std::exception& e) {
                util::log_line(util::LogLevel::kInfo, what + " not made: " + e.what());
                return {};
            }
        });
    for (std::size_t k = 0; k < first.size(); ++k) {
        const Linked linked = links.take(k);
        if (linked.artifact && load_found(first[k], *linked.artifact, linked.linked_in, loaded)) {
            first[k].linked_first = true;
            with_entries_.push_back(std::move(first[k]));
        }
    }
}

void WarmUpBundles::queue_missing(const std::vector<Result<KernelHandle>>& results) noexcept {
    try {
        queue(results);
    } catch (const std::exception& e) {  // the warm-up's results stand; no bundle is no error
        util::log_line(util::LogLevel::kInfo,
                       std::string("warm_up: bundles not queued: ") + e.what());
    }
    missing_.clear();
    with_entries_.clear();
}

void WarmUpBundles::queue(const std::vector<Result<KernelHandle>>& results) {
    // Linked only for a tier another process reads: a writable disk, or a remote tier.
    if (!tiers_shared()) return;
    // The bundles loaded or linked first: their members' own entries where the disk tier lacks
    // them (a process ended before it made them), for kernel() in a later process. Without a
    // writable disk, for those linked first only.
    const store::DiskStore* disk = modules_.tiers().disk();
    const bool on_disk = disk != nullptr && !disk->read_only();
    for (Bundle& bundle : with_entries_) {
        if (!on_disk && !bundle.linked_first) continue;
        BundleBuilder::Job job;
        job.plan = std::move(bundle.plan);
        job.target = bundle.target;
        job.arch = arch_;
        for (const Member* member : bundle.members) {
            if (!results[member->item].ok()) continue;
            job.entries.push_back({items_[member->item].key, std::move(**sources_[member->item]),
                                   member->fingerprint});
        }
        if (!job.entries.empty()) modules_.bundles().add(std::move(job));
    }
    for (Bundle& bundle : missing_) {
        bool all_loaded = true;
        for (const Member* member : bundle.members) {
            all_loaded = all_loaded && results[member->item].ok();
        }
        if (!all_loaded) continue;  // a member that failed would fail the link too
        BundleBuilder::Job job;
        job.plan = std::move(bundle.plan);
        job.target = bundle.target;
        job.ptx.reserve(bundle.members.size());
        for (const Member* member : bundle.members) {
            job.ptx.push_back((*sources_[member->item])->bytes);
        }
        modules_.bundles().add(std::move(job));
    }
}

}  // namespace kcache::cache
