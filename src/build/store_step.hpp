// SPDX-License-Identifier: Apache-2.0
// Step 4's store: a compiled cubin made into an artifact (payload and readable key material) and
// put to every tier, the caller's key recorded beside it for later miss explanations.
#pragma once

#include <functional>
#include <string_view>

#include "build/built_artifact.hpp"
#include "build/plan.hpp"
#include "compile/compiler.hpp"
#include "store/artifact_store.hpp"

namespace kcache::build {

// `tiers` may be null (a cache without tiers): the artifact is then decoded in place as one read
// back would be. `caller_key` is one line. `lease`, the remote tier's, is released once the
// artifact is uploaded. `writing` says whether the disk write may go behind the caller
// (ArtifactStore::put); `stored`, if given, runs once it ended, on whichever thread wrote it.
BuiltArtifact store_compiled(
    store::ArtifactStore* tiers, std::string_view caller_key, const BuildPlan& plan,
    const Source& source, compile::Compiled compiled, store::remote::Lease lease = {},
    store::ArtifactStore::Writing writing = store::ArtifactStore::Writing::kNow,
    std::function<void()> stored = {});

// Why a compile is needed, as far as the disk tier can tell: what differs from the artifact last
// stored under the same key (`options differ (stored "-DN=4", now "-DN=8")`). Logged at info
// level; costs nothing when that level is off.
void explain_miss(store::ArtifactStore* tiers, std::string_view caller_key, const BuildPlan& plan);

}  // namespace kcache::build
