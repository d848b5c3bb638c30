// SPDX-License-Identifier: Apache-2.0
// Every recipe of a fingerprint, in one place: what identifies an artifact in the tiers, what a
// loaded module records of its source for verification, and what an artifact was built from.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kcache/source.hpp"
#include "store/artifact_format.hpp"
#include "util/fingerprint.hpp"

namespace kcache::build {

// The source's own bytes as the key material names them (`source_hash`): the kind, the code (by
// its util::bytes_hash) and, for CUDA C++, its headers by name, whose order in the list does not
// change what compiles.
util::Fingerprint source_hash(const Source& source, const util::Fingerprint& bytes);

// The artifact's fingerprint, its name in every tier and what `kcache ls` shows: the source kind,
// the target arch, the compiler's exact build and the artifact format (`key.toolchain`), the
// normalized options, the sorted name expressions and the source hash. Not the caller's key nor
// the kernel names recorded with it: two keys asking for the same build share one artifact.
util::Fingerprint artifact_fingerprint(const store::KeyMaterial& key,
                                       const std::vector<std::string>& normalized_options,
                                       const std::vector<std::string>& sorted_expressions,
                                       const util::Fingerprint& source_hash);

// The source digest: a Source exactly as given (kind, bytes, headers, options, name
// expressions, arch_specific) and the arch it was loaded for. What verification compares on a
// hit; `bytes` is the util::bytes_hash of source.bytes when the caller has it.
util::Fingerprint source_digest(const Source& source, int arch,
                                const std::optional<util::Fingerprint>& bytes = std::nullopt);

// What a stored artifact was built from, as its fingerprint covers it (not the caller's key nor
// the kernel names): two artifacts equal here hold the same kernels.
util::Fingerprint built_from(const store::VerifiedArtifact& artifact);

}  // namespace kcache::build
