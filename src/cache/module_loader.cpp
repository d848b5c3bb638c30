// SPDX-License-Identifier: Apache-2.0
#include "cache/module_loader.hpp"

#include <chrono>
#include <string>
#include <utility>

#include "build/fingerprints.hpp"
#include "util/elapsed.hpp"
#include "util/log.hpp"
#include "util/try.hpp"

namespace kcache::cache {
namespace {

// A disk hit's way back to its bytes, for a load into another context after the driver let
// them go: the artifact under the same fingerprint, through the tiers, built from the same
// inputs as the one loaded (checked, as a lookup checks its key material). It may have been
// written again since, by a process that asked under another key, and still holds the same
// kernels. Holds the tiers weakly: loaded code may outlive its cache, and must not keep them.
driver::ImageSource read_back(const std::shared_ptr<store::ArtifactStore>& tiers,
                              const util::Fingerprint& fingerprint,
                              const store::VerifiedArtifact& loaded) {
    return [weak = std::weak_ptr<store::ArtifactStore>(tiers), fingerprint,
            inputs = build::built_from(loaded)]() -> Result<driver::Image> {
        auto held = weak.lock();
        if (!held) {
            return Error(Errc::kArtifactGone, "the cache that loaded entry " + fingerprint.hex() +
                                                  " is gone, and with it the way to its bytes");
        }
        auto artifact = held->read_back(fingerprint);
        if (artifact == nullptr) {
            return Error(Errc::kArtifactGone,
                         "entry " + fingerprint.hex() + " is no longer in the cache's tiers");
        }
        if (build::built_from(*artifact) != inputs) {
            return Error(Errc::kArtifactGone,
                         "entry " + fingerprint.hex() + " now holds what other inputs built");
        }
        const std::string_view payload = artifact->payload();
        return driver::Image{payload, std::move(artifact)};
    };
}

}  // namespace

std::optional<compile::PtxParamSizes> recorded_param_sizes(
    const Source& source, const store::VerifiedArtifact* artifact) {
    if (source.kind != SourceKind::kPtx || artifact == nullptr) return std::nullopt;
    return compile::parse_param_sizes_line(artifact->key().param_sizes);
}

namespace {

// An artifact of the tiers loaded in place. A disk hit is kept by no tier: the driver may let its
// bytes go and read them back.
Result<driver::ModuleId> load_artifact(driver::Driver& driver,
                                       const std::shared_ptr<store::ArtifactStore>& tiers,
                                       const util::Fingerprint& fingerprint,
                                       std::shared_ptr<const store::VerifiedArtifact> artifact,
                                       bool from_disk) {
    driver::ImageSource again =
        from_disk ? read_back(tiers, fingerprint, *artifact) : driver::ImageSource();
    const std::string_view payload = artifact->payload();
    return driver.load_binary(driver::Image{payload, std::move(artifact)}, std::move(again));
}

}  // namespace

Result<driver::ModuleId> load_bundle_code(driver::Driver& driver,
                                          const std::shared_ptr<store::ArtifactStore>& tiers,
                                          const util::Fingerprint& fingerprint,
                                          const store::Found& found) {
    return load_artifact(driver, tiers, fingerprint, found.entry, found.tier == store::Tier::kDisk);
}

Result<LoadedCode> load_module(driver::Driver& driver,
                               const std::shared_ptr<store::ArtifactStore>& tiers,
                               std::string_view key, const Source& source,
                               build::BuiltArtifact built) {
    const auto start = std::chrono::steady_clock::now();
    // Read before the driver may let the artifact go.
    std::optional<compile::PtxParamSizes> param_sizes =
        recorded_param_sizes(source, built.artifact.get());
    const bool compiled_here = built.artifact != nullptr || built.loadable.kind != source.kind;
    std::optional<util::Fingerprint> artifact;
    if (built.artifact != nullptr) artifact = built.fingerprint;
    Result<driver::ModuleId> module = Error(Errc::kInvalidArgument, "not loaded");
    if (built.artifact != nullptr) {
        module = load_artifact(driver, tiers, built.fingerprint, std::move(built.artifact),
                               built.provenance == Provenance::kDiskTier);
    } else if (built.loadable.kind == SourceKind::kCubin ||
               built.loadable.kind == SourceKind::kFatbin) {
        // A caller's binary: its bytes, moved here, are the ones a module made later uses.
        auto bytes = std::make_shared<const std::string>(std::move(built.loadable.bytes));
        const std::string_view view = *bytes;
        module = driver.load_binary(driver::Image{view, std::move(bytes)}, {});
    } else {
        module = driver.load_module(built.loadable);
    }
    if (!module && source.kind == SourceKind::kPtx && compiled_here) {
        // A cubin this driver cannot load (say, from a host compiler newer than the driver):
        // the source itself still may, through the driver's JIT.
        KCACHE_LOG(kInfo, "compiled artifact for " + std::string(key) + " did not load (" +
                              module.error().message() + "); handing the PTX to the driver");
        built.provenance = Provenance::kDriverJit;
        built.name_suffix.clear();  // the source's own names
        artifact.reset();
        module = driver.load_module(source);
    }
    TRY_ASSIGN(driver::ModuleId loaded, std::move(module));
    std::uint64_t compile_ns = built.compile_ns;
    // Loading PTX is the driver's JIT: that is compile time too.
    if (built.provenance == Provenance::kDriverJit) compile_ns += util::elapsed_since(start);
    return LoadedCode{loaded,
                      built.provenance,
                      compile_ns,
                      std::move(built.names),
                      std::move(built.name_suffix),
                      built.source_bytes,
                      artifact,
                      std::move(param_sizes)};
}

}  // namespace kcache::cache
