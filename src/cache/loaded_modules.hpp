// SPDX-License-Identifier: Apache-2.0
// The state behind a KernelCache: the published map, single flight, eviction and counters.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "build/artifact_builder.hpp"
#include "build/built_artifact.hpp"
#include "build/bundle.hpp"
#include "cache/bundle_builder.hpp"
#include "cache/loaded_module.hpp"
#include "cache/module_table.hpp"
#include "cache/stats_flusher.hpp"
#include "compile/ptx_params.hpp"
#include "kcache/kernel_cache.hpp"
#include "util/single_flight.hpp"
#include "util/striped_counter.hpp"

namespace kcache::cache {

// What warm_up's workers make ahead of the load (LoadedModules::prepare): a key's source and its
// artifact, found in a tier or compiled, not yet loaded.
struct PreparedArtifact {
    Source source;
    build::BuiltArtifact built;
    // What the module keeps of its source, worked out on the worker too.
    util::Fingerprint source_digest{};
    compile::PtxParamSizes param_sizes;
};

class LoadedModules {
public:
    explicit LoadedModules(CacheOptions options);
    ~LoadedModules();

    // The hit path: no lock, no shared write. Null if the key (or the kernel name) is not there
    // yet; the slow path then sorts it out.
    std::optional<KernelHandle> find_kernel(std::string_view key, int arch,
                                            std::string_view kernel_name) noexcept;
    // Everything else: verification, single flight, compile, publish, name resolution. With
    // `prepared` (taken at most once), a miss loads that artifact instead of making its own.
    Result<ModuleHandle> module_slow(std::string_view key, FunctionRef<Result<Source>()> make,
                                     int arch, std::optional<PreparedArtifact>* prepared = nullptr);

    // Whether `key` is loaded for `arch`; counts nothing (no hit, no miss).
    bool contains(std::string_view key, int arch) noexcept;

    // `for_load` also works out what the module will keep of the source (see PreparedArtifact),
    // and leaves counting the compile to the load, as kernel() counts it: compiled and loaded.
    Result<PreparedArtifact> prepare(std::string_view key, FunctionRef<Result<Source>()> make,
                                     int arch, bool for_load);
    Result<Provenance> prebuild(std::string_view key, FunctionRef<Result<Source>()> make, int arch);
    // warm_up's first look: prepare() for a load when a tier has the artifact (or nothing needs
    // compiling); else the generated source, for a prepare() later that compiles it.
    struct FirstLook {
        std::optional<PreparedArtifact> prepared;
        std::optional<Source> to_compile;
    };
    Result<FirstLook> look_in_tiers(std::string_view key, FunctionRef<Result<Source>()> make,
                                    int arch);

    // One member of a bundle, for load_bundle(): the key it is asked by, and its PTX source as
    // warm_up planned it.
    struct BundledKey {
        std::string_view key;
        const Source* source = nullptr;
        util::Fingerprint source_bytes{};  // util::bytes_hash of its bytes
    };
    // Loads a bundle's code (`found` under `plan`) once and publishes each member under its key,
    // sharing it; each counts as a miss served by `found`'s tier, or, with `linked_in` (the
    // bundle was linked for this load, in that time), as a miss no tier served and a compile.
    // Per member, in order: its module, or nullopt where another thread is loading the key or
    // loaded it (the caller looks it up as kernel() would). An error (the code did not load)
    // publishes nothing.
    // `code`: the bundle's code, loaded already by load_bundle_code() (not loaded again).
    Result<std::vector<std::optional<ModuleHandle>>> load_bundle(
        const build::BundlePlan& plan, const store::Found& found,
        const std::vector<BundledKey>& members, int arch,
        std::optional<std::chrono::nanoseconds> linked_in = std::nullopt,
        std::shared_ptr<const SharedCode> code = nullptr);
    // A bundle's code (`found` under `fingerprint`) loaded ahead of its plan, published by
    // nothing yet: load_bundle() publishes it, and it is unloaded when the last of it goes.
    Result<std::shared_ptr<const SharedCode>> load_bundle_code(const util::Fingerprint& fingerprint,
                                                               const store::Found& found);
    // The tiers (warm_up looks for bundles), and the links of bundles not found.
    store::ArtifactStore& tiers() const noexcept { return *builder_.tiers(); }
    BundleBuilder& bundles() noexcept { return bundles_; }

    // Removes a broken module: its JIT failed when a kernel was first resolved (with lazy loading
    // the driver may defer the JIT past load_module, and a failed compile must not stay cached),
    // or its code could not be loaded into another context any more (kArtifactGone).
    void discard(const ModuleHandle& module);

    void clear_locked();  // caller holds clear_mutex
    // The compiles' disk writes, the remote uploads and the remote hits' disk writes queued so
    // far, all done.
    void wait_for_uploads() {
        bundles_.drain();
        builder_.tiers()->drain_writes();
        if (store::remote::RemoteTier* remote = builder_.tiers()->remote()) remote->drain_uploads();
        builder_.tiers()->drain_refills();
    }
    // At the process's exit: the compiles' entries and the remote hits still queued for the disk
    // are written, the remote uploads still queued get their grace period, and the tiers'
    // threads stop (nothing of theirs runs during static destruction); then the statistics are
    // flushed.
    void at_exit() {
        bundles_.stop();
        builder_.tiers()->finish_writes();
        if (store::remote::RemoteTier* remote = builder_.tiers()->remote()) {
            remote->finish_uploads(remote->exit_grace());
            remote->stop_renewing();
        }
        builder_.tiers()->finish_refills();
        flush_stats();
    }
    // Adds what this cache counted since its last flush to the directory's persistent
    // statistics (`kcache -s`); a failure is logged by the flusher.
    void flush_stats() {
        if (stats_flusher_) (void)stats_flusher_->flush();
    }
    CacheStats stats() const;
    std::size_t size() const;

    // Never null; a raw reference so the hit path copies no shared_ptr.
    driver::Driver& driver() const noexcept { return *driver_; }

    const CacheOptions options;
    std::mutex clear_mutex;  // held by clear() and ExclusiveGuard

    util::StripedCounter hits;  // striped: bumped on every hit by every thread

private:
    // A bundle member's own entry, made after a warm-up that linked its bundle first or loaded it
    // (BundleBuilder): compiled and stored unless a tier has it; counted in compile_ns and the
    // tiers' writes only (its key's lookup was counted by the warm-up).
    Result<void> make_entry(std::string_view key, const Source& source, int arch);
    std::optional<ModuleHandle> probe(std::string_view key, int arch, std::uint64_t hash) noexcept;
    // Loads `prepared`'s artifact if given (its making counted already), else builds the
    // artifact of `source` itself; then publishes the module.
    Result<ModuleHandle> load_and_publish(std::string_view key, int arch, std::uint64_t hash,
                                          const Source& source,
                                          PreparedArtifact* prepared = nullptr);
    bool probe_exists(std::string_view key, int arch, std::uint64_t hash) noexcept;
    // What prepare() for a load keeps of `source` and the artifact `built` made of it.
    PreparedArtifact prepared_for_load(Source source, build::BuiltArtifact built, int arch) const;
    // Marks a hit's module as used now, for LRU; written only when it changes.
    void touch(LoadedModule& entry) noexcept {
        const std::uint64_t now = tick_.load(std::memory_order_relaxed);
        if (entry.last_used.load(std::memory_order_relaxed) != now) {
            entry.last_used.store(now, std::memory_order_relaxed);
        }
    }
    // A PTX source declares its kernels' parameters: no driver query at their first launch.
    // Verification trusts the driver's own answer instead (empty sizes). `stored`: what the
    // source's artifact recorded at compile time, taken instead of reading the PTX again.
    compile::PtxParamSizes ptx_param_sizes_of(
        const Source& source, std::optional<compile::PtxParamSizes> stored = std::nullopt) const;
    // publish() and evict_over_budget() require write_mutex_ and return the evicted modules, for
    // the caller to retire once the lock is released.
    std::vector<LoadedModule*> publish(LoadedModule* entry);
    std::vector<LoadedModule*> evict_over_budget();
    // Retires what publish() evicted, once the writers' lock is released: unloading (a driver
    // call) and freeing happen outside it, in one epoch collect for all the victims.
    void retire_evicted(const std::vector<LoadedModule*>& evicted);
    void replace_table(ModuleTable* table);  // requires write_mutex_

    std::shared_ptr<driver::Driver> driver_;
    std::shared_ptr<ModuleCounters> module_counters_;
    build::ArtifactBuilder builder_;
    BundleBuilder bundles_;  // after builder_: it stores in its tiers

    // Read by every hit, written only when a miss publishes: on a line of their own, away from
    // the writers' lock and the counters.
    alignas(util::kCacheLine) std::atomic<ModuleTable*> table_;  // written under write_mutex_
    std::atomic<std::uint64_t> tick_{1};  // insertion clock for LRU; bumped under write_mutex_
    alignas(util::kCacheLine) std::mutex write_mutex_;  // serialises table writers
    util::SingleFlight flights_;

    std::atomic<std::uint64_t> misses_{0}, compiles_{0}, compile_failures_{0}, compile_ns_{0};
    std::atomic<std::uint64_t> code_gone_{0};
    std::atomic<std::uint64_t> waits_{0}, evictions_{0}, verify_failures_{0};
    std::atomic<std::uint64_t> prebuilds_{0}, prebuild_compiles_{0};
    // Null without a disk tier; set once in the constructor, then only read. Last, so that it
    // is built when everything it reads (stats()) is.
    std::unique_ptr<StatsFlusher> stats_flusher_;
};

}  // namespace kcache::cache
