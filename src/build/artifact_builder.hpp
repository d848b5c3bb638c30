// SPDX-License-Identifier: Apache-2.0
// The build layer's face: a Source to a verified artifact without a GPU (DESIGN's lookup, steps
// 2-4): the plan and its fingerprint, the tiers by fingerprint, one compile per fingerprint
// across threads (single flight) and processes (a lock file beside the disk entry), the store.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "build/built_artifact.hpp"
#include "build/plan.hpp"
#include "compile/worker_pool.hpp"
#include "kcache/result.hpp"
#include "kcache/source.hpp"
#include "store/artifact_store.hpp"
#include "util/single_flight.hpp"

namespace kcache::build {

// What the build layer is made of: the tiers and the compilers.
struct BuildOptions {
    // Compile PTX on the host (nvJitLink) so that its cubin can be stored; off, PTX goes to the
    // driver's JIT.
    bool host_compile = true;
    std::size_t memory_bytes = 0;  // the memory tier's budget
    store::DiskOptions disk;       // directory empty: no disk tier
    // CUDA C++ compiled in this many worker processes running `worker_command`; 0: here.
    std::size_t compile_workers = 0;
    std::string worker_command;           // empty: compile::default_worker_command()
    store::remote::RemoteOptions remote;  // no backends: no remote tier
};

class ArtifactBuilder {
public:
    // Never fails: a disk directory that cannot be used, or workers that cannot start, leave
    // memory alone or compiles in this process, warned once (see disk_open_error()).
    explicit ArtifactBuilder(const BuildOptions& options);

    // Who asks: a lookup's tier outcome is counted (memory hit, disk hit or miss, once however
    // many times the tiers were read); a prebuild's is not, so that making ahead is not shown
    // as lookups served.
    enum class Asking { kLookup, kPrebuild };

    // The artifact for `source` on `arch`, from a tier or compiled and stored now; or, with no
    // artifact, what the driver must load itself (the caller's binary, PTX for its JIT).
    // `key` is the caller's, for the key material and messages.
    Result<BuiltArtifact> build(std::string_view key, int arch, const Source& source,
                                Asking asking = Asking::kLookup);

    // A lookup's first look, for warm_up: the artifact if a tier has it (or if there is nothing
    // to compile: the caller's binary, PTX for the driver's JIT), counted as the lookup's hit;
    // nullopt if it must be compiled, counting nothing (the build() that follows counts the
    // miss).
    Result<std::optional<BuiltArtifact>> find(std::string_view key, int arch, const Source& source);

    // The tiers (never null), shared so that loaded modules can read their bytes back.
    const std::shared_ptr<store::ArtifactStore>& tiers() const noexcept { return tiers_; }
    // Why the disk tier that was asked for is not there; nullopt when it is (or none was asked).
    const std::optional<Error>& disk_open_error() const noexcept { return disk_open_error_; }

private:
    // compile_once.cpp: single flight by fingerprint in this process, then the lock file across
    // processes, then compile_step and store_step.
    // A lookup's compile is written to disk behind its caller; a prebuild's before it returns,
    // since a prebuild is for the disk.
    Result<BuiltArtifact> build_once(std::string_view key, const BuildPlan& plan,
                                     const Source& source, bool& rejected, Asking asking);
    Result<BuiltArtifact> compile_and_store(std::string_view key, const BuildPlan& plan,
                                            const Source& source, bool& rejected, Asking asking);
    // The remote tier's lease: nullopt to compile here (holding `lease` when won), or the value
    // another node's compile uploaded while this one waited.
    std::optional<BuiltArtifact> lead_or_wait(std::string_view key, const BuildPlan& plan,
                                              const Source& source, bool& rejected,
                                              store::remote::Lease& lease);

    const bool host_compile_;
    std::optional<Error> disk_open_error_;  // set once in the constructor
    std::shared_ptr<store::ArtifactStore> tiers_;
    std::shared_ptr<compile::WorkerPool> workers_;
    // Threads of this process missing one fingerprint (under different keys, or through
    // warm_up and kernel() at once) compile it once; across processes, the disk lock does that.
    util::SingleFlight flights_;
};

}  // namespace kcache::build
