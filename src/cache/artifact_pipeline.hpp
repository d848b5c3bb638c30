// What a cache miss does to get a loaded library: look the artifact up in the store tiers by
// fingerprint, else compile it on the host (PTX through nvJitLink, CUDA C++ through NVRTC) and put
// it to every tier, then load the cubin. PTX the host cannot compile (no nvJitLink, or host
// compilation off) goes to the driver's JIT; CUDA C++ needs NVRTC.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cache/lowered_names.hpp"
#include "cache/single_flight.hpp"
#include "compile/compiler.hpp"
#include "compile/ptx_params.hpp"
#include "compile/worker_pool.hpp"
#include "driver/driver.hpp"
#include "kcache/result.hpp"
#include "kcache/source.hpp"
#include "store/artifact_store.hpp"
#include "util/fingerprint.hpp"

namespace kcache::cache {

class ArtifactPipeline {
public:
    enum class Origin { kDriverJit, kHostCompile, kMemoryTier, kDiskTier, kBinary };

    struct Built {
        driver::LibraryId library{};
        Origin origin = Origin::kDriverJit;
        std::uint64_t compile_ns = 0;  // host compile or driver JIT; 0 for a tier hit
        LoweredNames names;
        // The source bytes' hash (util::bytes_hash), where the tiers were asked: what the caller
        // needs for util::source_fingerprint without hashing a large source again.
        std::optional<util::Fingerprint> source_bytes{};
        // A PTX source's kernels' parameter sizes as its entry recorded them at compile time
        // (stored_param_sizes); nullopt where no entry was loaded or it recorded none readable.
        std::optional<compile::PtxParamSizes> param_sizes{};
    };

    // The parameter sizes `stored` recorded when `source` (PTX) was compiled into it; nullopt for
    // another kind of source, no entry, or a line that does not read.
    static std::optional<compile::PtxParamSizes> stored_param_sizes(
        const Source& source, const store::DecodedEntry* stored);

    // `store` may be null (no tiers); `host_compile` off sends PTX to the driver's JIT;
    // `workers`, if any, compile CUDA C++ in processes of their own (NVRTC serializes within one).
    ArtifactPipeline(driver::Driver& driver, std::shared_ptr<store::ArtifactStore> store,
                     bool host_compile, std::shared_ptr<compile::WorkerPool> workers = nullptr)
        : driver_(driver),
          store_(std::move(store)),
          host_compile_(host_compile),
          workers_(std::move(workers)) {}

    // produce() then load(), for a lookup.
    Result<Built> build(std::string_view key, int arch, const Source& source);

    // Who asks for an artifact: a lookup's tier outcome is counted (memory hit, disk hit or
    // miss, once however many times the tiers were read); a prebuild's is not (CacheCore counts
    // prebuilds apart, so that making ahead is not shown as lookups served).
    enum class Asking { kLookup, kPrebuild };

    // The loadable artifact without loading it (no GPU needed): what build() loads.
    struct Produced {
        Source loadable;  // empty when `stored` holds the cubin
        Origin origin = Origin::kDriverJit;
        std::uint64_t compile_ns = 0;
        LoweredNames names;
        // A tier's entry, whose cubin build() hands the driver in place (no copy): set for
        // memory- and disk-tier hits.
        std::shared_ptr<const store::DecodedEntry> stored;
        util::Fingerprint fingerprint{};                  // the entry's, with `stored`
        std::optional<util::Fingerprint> source_bytes{};  // as in Built
        // Set when there is a disk tier and the artifact is not on it: its write failed (now, or
        // when a memory hit's entry was made). A lookup loads it all the same.
        std::optional<Error> not_stored{};
    };
    Result<Produced> produce(std::string_view key, int arch, const Source& source,
                             Asking asking = Asking::kLookup);
    // Loads what produce() gave for `source` into the current context (the driver's JIT for PTX
    // it left to the driver, which counts as compile time in the result).
    Result<Built> load(std::string_view key, const Source& source, Produced produced);

    store::ArtifactStore* store() const noexcept { return store_.get(); }

private:
    // What a host compile needs, and what identifies its artifact in the tiers.
    struct Recipe {
        compile::Target target;
        util::Fingerprint fingerprint;
        store::KeyMaterial key;          // without the caller's key and kernel names
        util::Fingerprint source_bytes;  // util::bytes_hash of the source's bytes
    };
    // nullopt: nothing to compile on the host (a binary, or PTX left to the driver's JIT).
    Result<std::optional<Recipe>> plan(int arch, const Source& source) const;
    // Counts nothing; `rejected` is set when an entry was found under the fingerprint with key
    // material other than the recipe's.
    std::optional<Produced> lookup(std::string_view key, const Recipe& recipe, const Source& source,
                                   bool& rejected);
    Result<Produced> produce_planned(std::string_view key, const Recipe& recipe,
                                     const Source& source, bool& rejected);
    Result<Produced> compile_and_store(std::string_view key, const Recipe& recipe,
                                       const Source& source, bool& rejected);

    driver::Driver& driver_;
    std::shared_ptr<store::ArtifactStore> store_;
    const bool host_compile_;
    const std::shared_ptr<compile::WorkerPool> workers_;
    // Threads of this process missing one fingerprint (under different keys, or through
    // warm_up and kernel() at once) compile it once; across processes, the disk lock does that.
    SingleFlight flights_;
};

const char* origin_name(ArtifactPipeline::Origin origin) noexcept;

}  // namespace kcache::cache
