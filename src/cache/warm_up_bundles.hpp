// SPDX-License-Identifier: Apache-2.0
// warm_up's bundles (build/bundle.hpp): before a warm-up makes anything, the bundles of its PTX
// modules are looked for in the tiers and loaded, each as one module for its members; after it,
// the bundles no tier had are queued to be linked, for the next warm-up of the same modules.
// A warm-up missing many bundles whose members no tier has either (a cold one, of many kernels)
// links those first instead, on its workers, and loads them: the driver charges each module more
// the more it holds (docs/performance.md), so one module per key would not grow linearly. Their
// members' own entries are queued to be made after it, for kernel() in a later process; so are
// those a loaded bundle's members lack on disk (a process ended before it made them).
// Each warm-up keeps the list of its bundles as a record named by its keys, so that the next
// warm-up of those keys loads them while it plans, not after.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "build/bundle.hpp"
#include "build/warm_up_record.hpp"
#include "cache/loaded_modules.hpp"
#include "kcache/kernel_cache.hpp"

namespace kcache::cache {

class WarmUpBundles {
public:
    // Generates the source of each item at `indices` (a warm-up's first item of each key) not
    // loaded yet, once, and plans the PTX ones: what their bundles are named by. On up to
    // `threads` workers, started as warm_up starts its own (one more each `patience`); a
    // generator that fails is left to the warm-up, which calls it again and reports it.
    // Meanwhile, on the calling thread, the bundles that the record of the last warm-up of the
    // same keys names are looked up and their code loaded, for load() to publish those that the
    // plan names (build/warm_up_record.hpp).
    WarmUpBundles(LoadedModules& modules, const std::vector<WarmUpItem>& items,
                  const std::vector<std::size_t>& indices, int arch, unsigned threads,
                  std::chrono::microseconds patience);

    // A warm-up links its missing bundles first when this many a thread of its miss, with
    // every member: a bundle's link is a long task, and with fewer the threads' last round
    // would leave some idle longer than one module a key costs (docs/performance.md).
    static constexpr std::size_t kLinkFirstBundlesPerThread = 8;

    // Loads the bundles a tier has, and those linked first: the modules loaded, by item index
    // (nullopt for the rest).
    std::vector<std::optional<ModuleHandle>> load();
    // What item `i`'s generator gave here, for the rest of the warm-up, which then does not call
    // it again: a bundle member's source copied (its bundle may be linked later), another's
    // moved out (a later call finds nothing), the generator's error each time; nullopt for an
    // item not generated here.
    std::optional<Result<Source>> take_source(std::size_t i);
    // After the warm-up, with its results by item index: the bundles no tier had, every member of
    // which loaded, queued to be linked, and the own entries of the loaded members of bundles
    // loaded, to be made where the disk tier lacks them (LoadedModules::bundles()).
    void queue_missing(const std::vector<Result<KernelHandle>>& results) noexcept;

private:
    void queue(const std::vector<Result<KernelHandle>>& results);
    // A bundle's lookup is a file's read and check: one thread keeps ahead of the loads from a
    // disk; up to this many as the loads wait for them (a remote tier's round trips).
    static constexpr std::size_t kLookupThreads = 4;
    // How long a plan made beside the loads of a record's bundles waits before it starts another
    // worker.
    static constexpr std::chrono::microseconds kPlanPatienceBesideLoads{1000};
    struct Member {
        std::size_t item = 0;
        util::Fingerprint fingerprint{};  // its own artifact's, what bundles are named by
        util::Fingerprint source_bytes{};
        compile::Target target;
        std::string toolchain;
    };
    struct Bundle {
        build::BundlePlan plan;
        compile::Target target;
        std::vector<const Member*> members;
        bool linked_first = false;
    };
    // Loads `bundle` from `found` into `loaded` (by item index); false, logged, if its code did
    // not load. `linked_in`: it was linked here, in that time (LoadedModules::load_bundle).
    // `code`: its code, loaded ahead.
    bool load_found(const Bundle& bundle, const store::Found& found,
                    std::optional<std::chrono::nanoseconds> linked_in,
                    std::vector<std::optional<ModuleHandle>>& loaded,
                    std::shared_ptr<const SharedCode> code = nullptr);
    // The bundles this warm-up's record names (build/warm_up_record.hpp), if a tier has one that
    // a warm-up of `keys` keys could have written; none otherwise.
    std::vector<util::Fingerprint> read_record(std::size_t keys);
    // Looks up and loads those of `bundles` a tier has, into ahead_, published by nothing yet.
    void load_ahead(const std::vector<util::Fingerprint>& bundles) noexcept;
    // Keeps the `planned` bundles as this warm-up's record, where it differs from the one read.
    void record(const std::vector<util::Fingerprint>& planned) noexcept;
    // Links the missing bundles first, and loads them, if enough miss with every member.
    void link_first(std::vector<std::optional<ModuleHandle>>& loaded);
    // A tier another process reads: a writable disk, or a remote tier.
    bool tiers_shared() const;

    LoadedModules& modules_;
    const std::vector<WarmUpItem>& items_;
    const int arch_;
    const unsigned threads_;
    const std::chrono::microseconds patience_;
    std::vector<std::optional<Result<Source>>> sources_;  // by item index
    std::vector<bool> member_;                            // by item index
    std::vector<Member> members_;  // the PTX items planned for a host compile
    std::vector<Bundle> missing_;
    std::vector<Bundle> with_entries_;  // loaded, found or linked first: their members' entries
    build::WarmUpRecordPlan record_;
    std::vector<util::Fingerprint> recorded_;  // what its record named (none without one)
    // Bundles loaded ahead of the plan, by fingerprint: what was found, and its code (null where
    // the driver refused it).
    struct LoadedAhead {
        store::Found found;
        std::shared_ptr<const SharedCode> code;
    };
    struct ByFingerprint {
        bool operator()(const util::Fingerprint& a, const util::Fingerprint& b) const noexcept {
            return a.high != b.high ? a.high < b.high : a.low < b.low;
        }
    };
    std::map<util::Fingerprint, LoadedAhead, ByFingerprint> ahead_;
};

}  // namespace kcache::cache
