// SPDX-License-Identifier: Apache-2.0
// Step 5 of a lookup, its first half: what the build layer gave, loaded as a module in the
// driver. A cubin the driver refuses falls back to the driver's JIT of the PTX it came from.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

#include "build/built_artifact.hpp"
#include "compile/ptx_params.hpp"
#include "driver/driver.hpp"
#include "store/artifact_store.hpp"

namespace kcache::cache {

struct LoadedCode {
    driver::ModuleId module{};
    Provenance provenance = Provenance::kDriverJit;
    std::uint64_t compile_ns = 0;  // the host compile's, or the driver's JIT; 0 for a tier hit
    build::LoweredNames names;
    std::string name_suffix;                          // as in build::BuiltArtifact, if it loaded
    std::optional<util::Fingerprint> source_bytes{};  // as in build::BuiltArtifact
    std::optional<util::Fingerprint> artifact{};      // the artifact's fingerprint, if one loaded
    // A PTX source's kernels' parameter sizes as its artifact recorded them at compile time;
    // nullopt where no artifact was loaded or it recorded none readable.
    std::optional<compile::PtxParamSizes> param_sizes{};
};

// The parameter sizes `artifact` recorded when `source` (PTX) was compiled into it; nullopt for
// another kind of source, no artifact, or a line that does not read.
std::optional<compile::PtxParamSizes> recorded_param_sizes(const Source& source,
                                                           const store::VerifiedArtifact* artifact);

// Loads `built` for every context (the driver's JIT for PTX the build layer left to it, which
// counts as compile time). A disk hit is loaded without keeping its bytes: the driver reads them
// back through `tiers` (held weakly) if another context needs them.
Result<LoadedCode> load_module(driver::Driver& driver,
                               const std::shared_ptr<store::ArtifactStore>& tiers,
                               std::string_view key, const Source& source,
                               build::BuiltArtifact built);

// Loads the code a bundle's members share (build/bundle.hpp), found in a tier under
// `fingerprint`: a disk hit without keeping its bytes, as load_module() loads one.
Result<driver::ModuleId> load_bundle_code(driver::Driver& driver,
                                          const std::shared_ptr<store::ArtifactStore>& tiers,
                                          const util::Fingerprint& fingerprint,
                                          const store::Found& found);

}  // namespace kcache::cache
