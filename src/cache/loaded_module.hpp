// SPDX-License-Identifier: Apache-2.0
// One loaded module: the code loaded for one (key, arch), the kernels resolved from it, and the
// reference count that keeps it loaded while handles use it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "build/lowered_names.hpp"
#include "compile/ptx_params.hpp"
#include "driver/driver.hpp"
#include "util/fingerprint.hpp"
#include "util/same_bytes.hpp"
#include "util/striped_counter.hpp"

namespace kcache::cache {

// Counters a module updates after its cache may be gone (a handle outliving the cache).
struct ModuleCounters {
    std::atomic<std::uint64_t> loaded{0};
    std::atomic<std::uint64_t> unloaded{0};
};

struct ResolvedKernel {
    std::string name;
    driver::KernelId id{};
    driver::Driver* driver = nullptr;      // the module's, kept alive by it
    const ResolvedKernel* next = nullptr;  // immutable once published

    // The parameter sizes: read from the PTX source when it declares them plainly (set before
    // the kernel is published), else asked of the driver at the first call rather than when the
    // kernel is resolved: a warm start resolves kernels that may never be launched with checked
    // arguments, and the query (one driver call per parameter) is a sizeable part of a load
    // (docs/performance.md). Null when the driver cannot tell (kUnsupported); a failed query is
    // returned and asked again next time.
    Result<const std::vector<std::size_t>*> param_sizes() const;
    // The launch path's look at the above, with no Result: the parameter count once known,
    // kCountUnknown where the driver cannot tell, kCountNotAsked before the first query.
    static constexpr long kCountUnknown = -1;
    static constexpr long kCountNotAsked = -2;
    long param_count() const noexcept {
        switch (params_state_.load(std::memory_order_acquire)) {
            case 1:
                return static_cast<long>(param_sizes_.size());
            case 2:
                return kCountUnknown;
            default:
                return kCountNotAsked;
        }
    }
    void set_param_sizes(std::vector<std::size_t> sizes);  // before publication only

private:
    // 0: not asked yet; 1: known (param_sizes_ set); 2: the driver cannot tell. Release/acquire:
    // a launch that reads 1 sees the sizes written before it.
    mutable std::atomic<int> params_state_{0};
    mutable std::mutex params_mutex_;               // serialises the first query
    mutable std::vector<std::size_t> param_sizes_;  // written once, before state 1
};

// Code loaded once for several modules (a bundle's members: build/bundle.hpp), unloaded when
// the last of them unloads.
class SharedCode {
public:
    SharedCode(driver::ModuleId loaded, std::shared_ptr<driver::Driver> driver) noexcept
        : module(loaded), driver_(std::move(driver)) {}
    ~SharedCode() { driver_->unload_module(module); }
    SharedCode(const SharedCode&) = delete;
    SharedCode& operator=(const SharedCode&) = delete;

    const driver::ModuleId module;

private:
    const std::shared_ptr<driver::Driver> driver_;
};

class LoadedModule {
public:
    LoadedModule(std::string key, int arch, std::uint64_t hash, util::Fingerprint source_digest,
                 std::optional<util::Fingerprint> artifact, driver::ModuleId module,
                 std::shared_ptr<driver::Driver> driver, std::shared_ptr<ModuleCounters> counters,
                 build::LoweredNames names = {}, compile::PtxParamSizes param_sizes = {});
    ~LoadedModule();
    // A bundle member (before it is published): its code is `code`, shared with the other
    // members, where its own kernels and variables are named with `suffix` added
    // (build::bundled_symbol): it finds no other member's.
    void share(std::shared_ptr<const SharedCode> code, std::string suffix);
    // A module linked alone from PTX whose names were renamed (build/unique_names.hpp), before it
    // is published: its code names each of its symbols with `suffix` added, or, where its PTX
    // could not be renamed, as the caller does.
    void names_end_in(std::string suffix);
    LoadedModule(const LoadedModule&) = delete;
    LoadedModule& operator=(const LoadedModule&) = delete;

    const std::string key;
    const int arch;
    const std::uint64_t hash;               // util::hash_key(key, arch)
    const util::Fingerprint source_digest;  // what verification compares (build/fingerprints)
    // The fingerprint of the artifact it was loaded from; nullopt for code no tier holds (the
    // driver's JIT of PTX, a caller's binary).
    const std::optional<util::Fingerprint> artifact;

    // Recency for LRU: the cache's insertion tick when last used. Written without a lock and
    // only when it changes, so steady hits do not bounce the line between cores.
    // On its own line: it is the one field hits write, and every probe reads key and hash.
    alignas(util::kCacheLine) std::atomic<std::uint64_t> last_used{0};

    // Reference counting, striped so that threads on different stripes never share a line.
    //
    // Two kinds of counter: `home`, on the module itself, for the reference made where the module
    // was made (the first handle, and copies of it) and for the map's own reference; and one per
    // thread stripe for hits by key, in a block allocated at the first such hit (kStripes cache
    // lines that a module only used through its first handle never needs, and that a new process
    // would otherwise fault in for every module it loads). A reference is counted up and down on
    // the same counter: copies count on the source's, so that no counter goes below zero.
    //
    // Protocol: the map holds one reference on `home` while the module is published. retire()
    // (the module was unlinked from the map) installs a shared block of dead stripes where no
    // hit installed one, so that none is installed any more; else it collapses each stripe of
    // the block: it exchanges the stripe's count for kDead
    // and adds the count to `home`, so from then on `home` alone holds every reference. A counter
    // operation on a stripe that finds kDead in the value it replaced happened after the collapse:
    // a hit backs out (the increment landed on a dead stripe, which nobody reads), a copy or a
    // release moves to `home`. An increment or decrement that came before the exchange is in the
    // count it moved. While it collapses, the retirer holds a large bias on `home` so that no
    // release sees zero early; it drops the bias and the map's reference last. Whoever takes
    // `home` to zero unloads the library (once: the CAS on `unloaded_`) and frees the module
    // through the epoch domain, since readers pinned then may still look at it in an old table.
    //
    // So a hit is one locked increment (the probe's pin guards the module's memory until then)
    // and a release one locked decrement, with no pin: a release that does not take `home` to
    // zero does not touch the module again, and one that does owns it.
    static constexpr std::uint32_t kHomeStripe = util::kStripes;
    // Counts a hit on `stripe` (below kStripes): the counter the reference is on (kHomeStripe
    // if the stripe block could not be allocated), or kNotAcquired if the module is retired. The
    // caller is pinned in the epoch domain. A plain number, not an optional: an optional comes
    // back through memory, which stalls the hit path.
    static constexpr std::uint32_t kNotAcquired = ~std::uint32_t{0};
    // Inline where the block is installed (every hit but a module's first): the hit path makes
    // no call for it.
    std::uint32_t try_acquire(std::uint32_t stripe) noexcept {
        RefStripes* stripes = stripes_.load(std::memory_order_acquire);
        if (stripes == nullptr) return try_acquire_slow(stripe);
        // After the collapse (or on the sealed block) the increment lands on a dead stripe, which
        // nobody reads again.
        if (dead(stripes->stripes[stripe].count.fetch_add(1, std::memory_order_acq_rel))) {
            return kNotAcquired;
        }
        return stripe;
    }
    void add_ref(std::uint32_t stripe) noexcept;  // from a reference already held on `stripe`
    void release(std::uint32_t stripe) noexcept {
        // Release: this handle's uses of the module come before whoever unloads it sees the
        // count. A decrement before the collapse is in the count it moves, and the module is not
        // touched again; after it, the reference is on `home`.
        if (stripe != kHomeStripe &&
            !dead(block()->stripes[stripe].count.fetch_sub(1, std::memory_order_release))) {
            return;
        }
        release_home();
    }
    void retire() noexcept;  // by whoever unlinked the module from the map, once
    // Whether a handle holds the module; a snapshot for eviction's order, never for safety.
    bool referenced() const noexcept;

    // A __device__ or __constant__ variable of the module in the current context.
    Result<DeviceGlobal> global(const std::string& name) const;

    // Finds a resolved kernel without locking; resolve() asks the driver on first use.
    const ResolvedKernel* find_kernel(std::string_view name) const noexcept {
        for (const ResolvedKernel* k = kernels_.load(std::memory_order_acquire); k != nullptr;
             k = k->next) {
            if (util::same_bytes(k->name, name)) return k;
        }
        return nullptr;
    }
    Result<const ResolvedKernel*> resolve(std::string_view name);
    // Set when resolving a kernel hit a deferred JIT failure, or a launch found the code's bytes
    // gone for another context (kArtifactGone): the module is unusable, and the cache drops it
    // at the next lookup.
    bool broken() const noexcept { return broken_.load(std::memory_order_acquire) != 0; }
    // `why`: kCompileFailed or kArtifactGone; the first reason given stays.
    void mark_broken(Errc why) noexcept {
        std::uint8_t none = 0;
        broken_.compare_exchange_strong(none, static_cast<std::uint8_t>(why) + 1,
                                        std::memory_order_acq_rel);
    }
    // Why it broke, for the log and the counters; only meaningful when broken().
    Errc broken_because() const noexcept {
        const std::uint8_t why = broken_.load(std::memory_order_acquire);
        return why == 0 ? Errc::kCompileFailed : static_cast<Errc>(why - 1);
    }

private:
    struct alignas(util::kCacheLine) RefStripe {
        std::atomic<std::int64_t> count{0};
    };
    struct RefStripes {
        RefStripe stripes[util::kStripes];
    };
    // A collapsed stripe's count: far above any count of live references, and far below
    // overflow for any number of late increments.
    static constexpr std::int64_t kDead = std::int64_t{1} << 60;
    // What a retirer installs where no block was: every stripe dead, shared by all modules, so
    // that a block installed later cannot escape the collapse. Never freed.
    static RefStripes& sealed_block() noexcept;

    static bool dead(std::int64_t count) noexcept { return count >= kDead / 2; }
    // What its code names `symbol`: itself, but in a bundle member's.
    std::string in_code(std::string_view symbol) const;
    // Set by names_end_in (a suffix, and no bundle's code): the code may name a symbol without
    // its suffix, where the PTX could not be renamed.
    bool suffix_may_be_missing() const { return shared_code_ == nullptr && !code_suffix_.empty(); }
    RefStripes* block() const noexcept { return stripes_.load(std::memory_order_acquire); }
    std::uint32_t try_acquire_slow(std::uint32_t stripe) noexcept;
    void release_home() noexcept;
    void unload() noexcept;  // `home` reached zero

    // On a line of its own: handle copies write it, and probes read the fields around it.
    // Starts at 1, the map's reference.
    alignas(util::kCacheLine) std::atomic<std::int64_t> home_refs_{1};
    // Installed once, by the first hit by key (freed with the module), or by the retirer
    // (sealed_block()) where no hit came first.
    alignas(util::kCacheLine) std::atomic<RefStripes*> stripes_{nullptr};
    std::atomic<bool> retired_{false};
    std::atomic<bool> unloaded_{false};
    std::atomic<std::uint8_t> broken_{0};  // 0, or the reason's Errc + 1

    const driver::ModuleId module_;
    const build::LoweredNames names_;  // for CUDA C++ templates; immutable
    // What a PTX source declares, for kernels resolved later; immutable.
    const compile::PtxParamSizes param_sizes_;
    const std::shared_ptr<driver::Driver> driver_;
    const std::shared_ptr<ModuleCounters> counters_;
    // A bundle member's: the code it shares (dropped when it unloads), and what of it is its own.
    std::shared_ptr<const SharedCode> shared_code_;
    std::string code_suffix_;

    std::mutex resolve_mutex_;  // serialises resolve(); readers use kernels_ without it
    std::atomic<const ResolvedKernel*> kernels_{nullptr};  // push-front list, release/acquire
};

}  // namespace kcache::cache
