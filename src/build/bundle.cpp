// SPDX-License-Identifier: Apache-2.0
#include "build/bundle.hpp"

#include <algorithm>
#include <numeric>
#include <utility>

#include "build/fingerprints.hpp"
#include "compile/ptx_params.hpp"
#include "util/log.hpp"
#include "util/try.hpp"

namespace kcache::build {
namespace {

constexpr const char* kBundleKind = "ptx bundle";

bool before(const util::Fingerprint& a, const util::Fingerprint& b) {
    return a.high != b.high ? a.high < b.high : a.low < b.low;
}

bool shares_a_symbol(const std::vector<std::string>& sorted_a,
                     const std::vector<std::string>& sorted_b) {
    auto a = sorted_a.begin();
    auto b = sorted_b.begin();
    while (a != sorted_a.end() && b != sorted_b.end()) {
        if (*a == *b) return true;
        *a < *b ? ++a : ++b;
    }
    return false;
}

}  // namespace

std::vector<std::vector<std::size_t>> pack_bundles(const std::vector<BundleMember>& members) {
    std::vector<std::size_t> order(members.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        return before(members[a].fingerprint, members[b].fingerprint);
    });
    struct Open {
        std::vector<std::size_t> members;
        std::vector<std::string> symbols;  // sorted
    };
    std::vector<Open> bundles;
    for (std::size_t i = 0; i < order.size(); ++i) {
        const BundleMember& member = members[order[i]];
        // The same module twice (two keys, one source) is one artifact: bundled once.
        if (i > 0 && members[order[i - 1]].fingerprint == member.fingerprint) continue;
        auto fits = std::find_if(bundles.begin(), bundles.end(), [&](const Open& bundle) {
            return bundle.members.size() < kBundleMembers &&
                   !shares_a_symbol(bundle.symbols, member.symbols);
        });
        if (fits == bundles.end()) fits = bundles.insert(bundles.end(), Open{});
        fits->members.push_back(order[i]);
        std::vector<std::string> merged;
        std::merge(fits->symbols.begin(), fits->symbols.end(), member.symbols.begin(),
                   member.symbols.end(), std::back_inserter(merged));
        fits->symbols = std::move(merged);
    }
    std::vector<std::vector<std::size_t>> packed;
    for (Open& bundle : bundles) {
        if (bundle.members.size() > 1) packed.push_back(std::move(bundle.members));
    }
    return packed;
}

BundlePlan plan_bundle(const std::vector<const BundleMember*>& members,
                       const compile::Target& target, const std::string& toolchain) {
    util::FingerprintBuilder sources;
    sources.add("kcache bundle").add(static_cast<std::uint64_t>(members.size()));
    for (const BundleMember* member : members) {
        sources.add(member->fingerprint.high).add(member->fingerprint.low);
    }
    BundlePlan plan;
    plan.key.arch = target.name();
    plan.key.source_kind = kBundleKind;
    const util::Fingerprint members_hash = sources.finish();
    plan.key.source_hash = members_hash.hex();
    plan.key.toolchain = toolchain;
    plan.key.caller_key = "bundle of " + std::to_string(members.size()) + " PTX modules";
    plan.fingerprint = artifact_fingerprint(plan.key, {}, {}, members_hash);
    return plan;
}

std::optional<store::Found> find_bundle(store::ArtifactStore& tiers, const BundlePlan& plan) {
    auto found = tiers.find(plan.fingerprint);
    if (!found) return std::nullopt;
    const store::KeyMaterialView& stored = found->entry->key();
    if (found->entry->kind() != store::PayloadKind::kCubin || stored.arch != plan.key.arch ||
        stored.source_kind != plan.key.source_kind || stored.source_hash != plan.key.source_hash ||
        !stored.options.empty() || !stored.names.empty() ||
        stored.toolchain != plan.key.toolchain) {
        KCACHE_LOG(kInfo, "stored bundle " + plan.fingerprint.hex() +
                              " has other key material; loading its members one by one");
        return std::nullopt;
    }
    tiers.keep(plan.fingerprint, *found);  // a remote hit, for the disk
    return found;
}

Result<void> make_bundle(store::ArtifactStore& tiers, const BundlePlan& plan,
                         const std::vector<const std::string*>& ptx,
                         const compile::Target& target) {
    TRY_ASSIGN(compile::Compiled linked, compile::link_ptx_bundle(ptx, target));
    // Every member's parameter sizes, as a member's own entry records them: kernel names are
    // unique within a bundle (pack_bundles).
    compile::PtxParamSizes sizes;
    for (const std::string* module : ptx) {
        compile::PtxParamSizes own = compile::ptx_param_sizes(*module);
        sizes.insert(sizes.end(), std::make_move_iterator(own.begin()),
                     std::make_move_iterator(own.end()));
    }
    std::sort(sizes.begin(), sizes.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    store::Artifact artifact;
    artifact.kind = store::PayloadKind::kCubin;
    artifact.key = plan.key;
    artifact.key.param_sizes = compile::param_sizes_line(sizes);
    artifact.payload = std::move(linked.cubin);
    // Written now: its linker holds the lock beside its entry until it is on disk.
    store::Stored stored = tiers.put(plan.fingerprint, artifact);
    if (stored.entry == nullptr) {
        return Error(Errc::kInvalidArgument,
                     "bundle " + plan.fingerprint.hex() + ": key material no entry can hold");
    }
    return stored.disk;
}

}  // namespace kcache::build
