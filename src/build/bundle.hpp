// SPDX-License-Identifier: Apache-2.0
// Bundles: the PTX modules of a warm-up linked into a few cubins, each stored as an artifact of
// its own, so that a later warm-up of the same modules loads a few modules instead of one per key
// (the driver charges a module load about as much as the kernels in it: docs/performance.md).
// A bundle is named by its members' own fingerprints: a member whose source changed is another
// member, and the bundle another bundle.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compile/compiler.hpp"
#include "kcache/result.hpp"
#include "store/artifact_format.hpp"
#include "store/artifact_store.hpp"
#include "util/fingerprint.hpp"

namespace kcache::build {

// The most members one bundle links, and how many it links on average: a bundle is built after
// the warm-up that asked for it, on one thread, so that smaller bundles are ready sooner and
// several build at once.
inline constexpr std::size_t kBundleMembers = 64;
inline constexpr std::size_t kBundleMembersAverage = 32;

// In a bundle, each member's own module-scope names (compile/ptx_symbols.hpp) end in this marker
// and the member's index in the bundle: modules that reuse a kernel, function or variable name
// (generators reuse kernel names for other shapes) link together, each calling its own, and a
// member finds only its own names in the bundle's code.
inline constexpr std::string_view kBundleMarker = "$kc";
// A bundle entry's source kind (its key material's), beside a key's "ptx" or "cuda".
inline constexpr const char* kBundleSourceKind = "ptx bundle";
// Member `index`'s `symbol` as the bundle's code names it.
std::string bundled_symbol(std::string_view symbol, std::size_t index);

// PTX modules packed into bundles, each module named by its own artifact's fingerprint
// (BuildPlan::fingerprint), as indices into `members`: in fingerprint order, a bundle ending
// after a member whose fingerprint says so (one in kBundleMembersAverage) or when it is full, so
// that a member added or gone changes its own bundle and seldom another. A module under two keys
// is packed once; a bundle of one member is left out. The same members pack the same way,
// whatever order they come in.
std::vector<std::vector<std::size_t>> pack_bundles(const std::vector<util::Fingerprint>& members);

struct BundlePlan {
    util::Fingerprint fingerprint;  // the bundle artifact's, in every tier
    store::KeyMaterial key;
};
// The plan of a bundle of `members`, in the order given (pack_bundles'). `toolchain`: the
// members' own plans' (BuildPlan::key.toolchain), the same for every PTX module.
BundlePlan plan_bundle(const std::vector<util::Fingerprint>& members, const compile::Target& target,
                       const std::string& toolchain);

// What the tiers hold under a bundle's plan: its artifact and the tier it came from, or a record
// that its members did not link together (with the plan's toolchain: another is another plan),
// or neither. Counts no lookup.
struct FoundBundle {
    std::optional<store::Found> artifact;
    bool did_not_link = false;
};
FoundBundle find_bundle(store::ArtifactStore& tiers, const BundlePlan& plan);
// The same for what a lookup of the plan's fingerprint found earlier (`found`: nullopt if
// nothing).
FoundBundle bundle_found(store::ArtifactStore& tiers, const BundlePlan& plan,
                         std::optional<store::Found> found);
// Whether `found` may be a bundle's code (a cubin of a bundle's source kind), before its plan is
// known: what a warm-up loads ahead of it (build/warm_up_record.hpp).
bool may_be_bundle(const store::Found& found);

// Links the members' PTX (`ptx`, in the plan's order), each member's names renamed
// (bundled_symbol), and puts the bundle in the tiers, written to disk before it returns.
// kCompileFailed (with nvJitLink's log) when the modules cannot be one bundle: a member's
// module-scope names do not read or already hold the marker, the link fails, or its cubin defines
// a name that is no one member's own; that is recorded in the tiers, so that no process links
// those members again.
Result<void> make_bundle(store::ArtifactStore& tiers, const BundlePlan& plan,
                         const std::vector<const std::string*>& ptx, const compile::Target& target);

// How link_bundle() ended; an error is a link or store that failed (the members stay unbundled).
enum class BundleLink {
    kLinked,            // linked and stored here
    kStoredAlready,     // another linker stored it first
    kDidNotLinkBefore,  // recorded as members that do not link together
    kAnotherLinks,      // another process holds the lock beside its entry
};
// make_bundle() by one process of those sharing a writable disk tier: under the lock beside the
// bundle's entry, not waited for, and only if no one stored it or recorded that it does not link
// while the lock was elsewhere. Without a writable disk tier, make_bundle() unless a tier has it.
Result<BundleLink> link_bundle(store::ArtifactStore& tiers, const BundlePlan& plan,
                               const std::vector<const std::string*>& ptx,
                               const compile::Target& target);

}  // namespace kcache::build
