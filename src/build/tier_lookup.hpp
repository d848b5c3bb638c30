// SPDX-License-Identifier: Apache-2.0
// Step 3 of a lookup: the tiers asked by the plan's fingerprint, and what they hold checked
// against the plan before it is served.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "build/built_artifact.hpp"
#include "build/plan.hpp"
#include "store/artifact_store.hpp"

namespace kcache::build {

// The artifact the tiers hold under the plan's fingerprint if its key material is the plan's and
// it names every kernel the source asks for. Counts nothing (the caller counts the lookup once);
// `rejected` is set when the tiers held an artifact with other key material.
std::optional<BuiltArtifact> find_in_tiers(store::ArtifactStore& tiers, std::string_view key,
                                           const BuildPlan& plan, const Source& source,
                                           bool& rejected);

// Key material lines naming a CUDA C++ artifact's kernels: "<lowered> <- <expression>".
std::vector<std::string> name_lines(const LoweredNames& names);

}  // namespace kcache::build
