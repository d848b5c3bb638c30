// SPDX-License-Identifier: Apache-2.0
#include "build/artifact_builder.hpp"

#include <utility>

#include "build/tier_lookup.hpp"
#include "util/log.hpp"
#include "util/try.hpp"

namespace kcache::build {
namespace {

// The tiers for `options`. A disk directory that cannot be used is warned of once and leaves the
// memory tier working alone; `why` keeps the reason.
std::shared_ptr<store::ArtifactStore> open_tiers(const BuildOptions& options,
                                                 std::optional<Error>& why) {
    std::unique_ptr<store::DiskStore> disk;
    if (!options.disk.directory.empty()) {
        auto opened = store::DiskStore::open(options.disk);
        if (opened) {
            disk = std::move(*opened);
        } else {
            why = opened.error();
            util::warn_once("disk-open:" + options.disk.directory,
                            "disk tier off, working from memory: " + opened.error().message());
        }
    }
    std::unique_ptr<store::remote::RemoteTier> remote;
    if (!options.remote.backends.empty()) {
        auto opened = store::remote::RemoteTier::open(options.remote);
        if (opened) {
            remote = std::move(*opened);
        } else {
            util::warn_once("remote-open", "remote tier off: " + opened.error().message());
        }
    }
    return std::make_shared<store::ArtifactStore>(options.memory_bytes, std::move(disk),
                                                  std::move(remote));
}

// Worker processes for CUDA C++ when asked for; null (compile in this process) otherwise, or when
// no worker command can be used.
std::shared_ptr<compile::WorkerPool> start_workers(const BuildOptions& options) {
    if (options.compile_workers == 0) return nullptr;
    const std::string command =
        options.worker_command.empty() ? compile::default_worker_command() : options.worker_command;
    if (command.empty()) {
        util::warn_once("workers",
                        "no compile worker command (set KCACHE_COMPILE_WORKER): compiling CUDA C++ "
                        "in this process");
        return nullptr;
    }
    auto pool = compile::WorkerPool::start(command, {"compile-worker"}, options.compile_workers);
    if (!pool) {
        util::warn_once(
            "workers", "compile workers off, compiling in this process: " + pool.error().message());
        return nullptr;
    }
    return std::shared_ptr<compile::WorkerPool>(std::move(*pool));
}

}  // namespace

ArtifactBuilder::ArtifactBuilder(const BuildOptions& options)
    : host_compile_(options.host_compile),
      tiers_(open_tiers(options, disk_open_error_)),
      workers_(start_workers(options)) {}

namespace {

// What the driver loads itself, where there is nothing to compile on the host.
BuiltArtifact for_the_driver(const Source& source) {
    BuiltArtifact built;
    built.loadable = source;
    built.provenance =
        source.kind == SourceKind::kPtx ? Provenance::kDriverJit : Provenance::kBinary;
    return built;
}

// One outcome per lookup, from where the artifact came: the tiers may have been read twice
// (before and after the compile lock, or after waiting for another thread).
store::ArtifactStore::Outcome outcome_of(const Result<BuiltArtifact>& built, bool rejected) {
    using Outcome = store::ArtifactStore::Outcome;
    if (built && built->provenance == Provenance::kMemoryTier) return Outcome::kMemoryHit;
    if (built && built->provenance == Provenance::kDiskTier) return Outcome::kDiskHit;
    if (built && built->provenance == Provenance::kRemoteTier) return Outcome::kRemoteHit;
    return rejected ? Outcome::kRejected : Outcome::kMiss;
}

}  // namespace

Result<BuiltArtifact> ArtifactBuilder::build(std::string_view key, int arch, const Source& source,
                                             Asking asking) {
    TRY_ASSIGN(std::optional<BuildPlan> plan, plan_build(arch, source, host_compile_));
    if (!plan) return for_the_driver(source);
    bool rejected = false;
    auto built = build_once(key, *plan, source, rejected, asking);
    if (asking == Asking::kLookup) tiers_->count(outcome_of(built, rejected));
    // A prebuild is for the disk: what a lookup compiled (found in memory, or shared by its
    // flight, both served as memory hits) may still be on its way there, and a failed write must
    // be told. What the prebuild compiled itself it wrote before returning here.
    if (asking == Asking::kPrebuild && built && built->artifact != nullptr && !built->not_stored &&
        built->provenance == Provenance::kMemoryTier && tiers_->disk() != nullptr) {
        built->not_stored = tiers_->once_written(plan->fingerprint);
    }
    return built;
}

Result<std::optional<BuiltArtifact>> ArtifactBuilder::find(std::string_view key, int arch,
                                                           const Source& source) {
    TRY_ASSIGN(std::optional<BuildPlan> plan, plan_build(arch, source, host_compile_));
    if (!plan) return std::optional<BuiltArtifact>(for_the_driver(source));
    bool rejected = false;
    auto found = find_in_tiers(*tiers_, key, *plan, source, rejected);
    // A rejected entry is left for build(), which replaces it and counts the rejection.
    if (!found) return std::optional<BuiltArtifact>();
    tiers_->count(outcome_of(*found, false));
    return found;
}

}  // namespace kcache::build
