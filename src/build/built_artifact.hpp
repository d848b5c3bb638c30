// SPDX-License-Identifier: Apache-2.0
// What the build layer gives the cache for one Source: a verified artifact (from a tier, or
// compiled and stored now), or what the driver must load itself. No GPU has been asked.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "build/lowered_names.hpp"
#include "kcache/provenance.hpp"
#include "kcache/result.hpp"
#include "kcache/source.hpp"
#include "store/artifact_format.hpp"
#include "util/fingerprint.hpp"

namespace kcache::build {

struct BuiltArtifact {
    // What the driver loads when `artifact` is null: the caller's binary, PTX for the driver's
    // JIT, or a cubin whose key material no artifact could hold. Empty otherwise.
    Source loadable;
    Provenance provenance = Provenance::kDriverJit;
    std::uint64_t compile_ns = 0;  // a host compile's; 0 for a tier hit
    LoweredNames names;
    // What the names its code defines end in, where its PTX was renamed before its link
    // (build/unique_names.hpp; the module still asks for a name unrenamed when the suffixed one
    // is not there); empty for every other artifact.
    std::string name_suffix;
    // The artifact from a tier or a compile, verified, whose cubin the loader hands the driver in
    // place (no copy).
    std::shared_ptr<const store::VerifiedArtifact> artifact;
    util::Fingerprint fingerprint{};  // the artifact's, with `artifact`
    // util::bytes_hash of the source's bytes, where the tiers were asked: what the source digest
    // takes without hashing a large source again.
    std::optional<util::Fingerprint> source_bytes{};
    // Set when there is a disk tier and the artifact is not on it: its write failed (now, or
    // when a memory hit's artifact was made). A lookup loads it all the same.
    std::optional<Error> not_stored{};
};

}  // namespace kcache::build
