// SPDX-License-Identifier: Apache-2.0
#include "build/bundle.hpp"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <optional>
#include <utility>

#include "build/fingerprints.hpp"
#include "compile/ptx_params.hpp"
#include "compile/ptx_rename.hpp"
#include "compile/ptx_symbols.hpp"
#include "store/disk_store.hpp"
#include "util/elf_symbols.hpp"
#include "util/log.hpp"
#include "util/try.hpp"

namespace kcache::build {
namespace {

// The record of a bundle that did not link: its payload is the reason.
constexpr const char* kUnlinkedKind = "ptx bundle that did not link";

bool before(const util::Fingerprint& a, const util::Fingerprint& b) {
    return a.high != b.high ? a.high < b.high : a.low < b.low;
}

// Whether `symbol`, as a bundle's cubin defines it, is one member's own: its name ends in the
// marker and the index of one of `members` (bundled_symbol).
bool one_members(std::string_view symbol, std::size_t members) {
    const std::size_t at = symbol.rfind(kBundleMarker);
    if (at == std::string_view::npos) return false;
    const std::string_view index = symbol.substr(at + kBundleMarker.size());
    if (index.empty() || index.size() > 4 || (index.size() > 1 && index.front() == '0') ||
        index.find_first_not_of("0123456789") != std::string_view::npos) {
        return false;
    }
    return std::stoul(std::string(index)) < members;
}

}  // namespace

std::string bundled_symbol(std::string_view symbol, std::size_t index) {
    return compile::renamed_symbol(symbol, kBundleMarker, index);
}

std::vector<std::vector<std::size_t>> pack_bundles(const std::vector<util::Fingerprint>& members) {
    std::vector<std::size_t> order(members.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(),
              [&](std::size_t a, std::size_t b) { return before(members[a], members[b]); });
    std::vector<std::vector<std::size_t>> packed;
    std::vector<std::size_t> bundle;
    auto close = [&] {
        if (bundle.size() > 1) packed.push_back(std::move(bundle));
        bundle.clear();
    };
    for (std::size_t i = 0; i < order.size(); ++i) {
        const util::Fingerprint& fingerprint = members[order[i]];
        // The same module twice (two keys, one source) is one artifact: bundled once.
        if (i > 0 && members[order[i - 1]] == fingerprint) continue;
        bundle.push_back(order[i]);
        if (bundle.size() == kBundleMembers || fingerprint.low % kBundleMembersAverage == 0) {
            close();
        }
    }
    close();
    return packed;
}

BundlePlan plan_bundle(const std::vector<util::Fingerprint>& members, const compile::Target& target,
                       const std::string& toolchain) {
    util::FingerprintBuilder sources;
    sources.add("kcache bundle, members' symbols renamed")
        .add(static_cast<std::uint64_t>(members.size()));
    for (const util::Fingerprint& member : members) sources.add(member.high).add(member.low);
    BundlePlan plan;
    plan.key.arch = target.name();
    plan.key.source_kind = kBundleSourceKind;
    const util::Fingerprint members_hash = sources.finish();
    plan.key.source_hash = members_hash.hex();
    plan.key.toolchain = toolchain;
    plan.key.caller_key = "bundle of " + std::to_string(members.size()) + " PTX modules";
    plan.fingerprint = artifact_fingerprint(plan.key, {}, {}, members_hash);
    return plan;
}

FoundBundle find_bundle(store::ArtifactStore& tiers, const BundlePlan& plan) {
    return bundle_found(tiers, plan, tiers.find(plan.fingerprint));
}

bool may_be_bundle(const store::Found& found) {
    return found.entry->kind() == store::PayloadKind::kCubin &&
           found.entry->key().source_kind == kBundleSourceKind;
}

FoundBundle bundle_found(store::ArtifactStore& tiers, const BundlePlan& plan,
                         std::optional<store::Found> found) {
    if (!found) return {};
    const store::KeyMaterialView& stored = found->entry->key();
    const bool same_plan = stored.arch == plan.key.arch &&
                           stored.source_hash == plan.key.source_hash && stored.options.empty() &&
                           stored.names.empty() && stored.toolchain == plan.key.toolchain;
    if (same_plan && stored.source_kind == kUnlinkedKind) return {std::nullopt, true};
    if (!same_plan || stored.source_kind != plan.key.source_kind ||
        found->entry->kind() != store::PayloadKind::kCubin) {
        KCACHE_LOG(kInfo, "stored bundle " + plan.fingerprint.hex() +
                              " has other key material; loading its members one by one");
        return {};
    }
    tiers.keep(plan.fingerprint, *found);  // a remote hit, for the disk
    return {std::move(found), false};
}

namespace {

// Records in the tiers that the plan's members did not link together: `reason`.
void record_unlinked(store::ArtifactStore& tiers, const BundlePlan& plan, const Error& reason) {
    store::Artifact record;
    record.kind = store::PayloadKind::kPtx;  // text: the reason
    record.key = plan.key;
    record.key.source_kind = kUnlinkedKind;
    record.payload = reason.message();
    (void)tiers.put(plan.fingerprint, record);
}

}  // namespace

Result<void> make_bundle(store::ArtifactStore& tiers, const BundlePlan& plan,
                         const std::vector<const std::string*>& ptx,
                         const compile::Target& target) {
    const std::string what = "bundle " + plan.fingerprint.hex();
    // Members that cannot be one bundle, whoever tries: recorded, so that none tries again.
    auto refuse = [&](Error reason) {
        record_unlinked(tiers, plan, reason);
        return reason;
    };
    std::vector<std::string> renamed;
    renamed.reserve(ptx.size());
    for (std::size_t i = 0; i < ptx.size(); ++i) {
        const auto symbols = compile::ptx_module_symbols(*ptx[i]);
        auto text = symbols ? compile::rename_ptx_symbols(*ptx[i], *symbols, kBundleMarker, i)
                            : std::nullopt;
        if (!text) {
            return refuse(
                Error(Errc::kCompileFailed,
                      what + ": member " + std::to_string(i) +
                          (symbols ? " already names a symbol with " + std::string(kBundleMarker)
                                   : std::string("'s module-scope names do not read"))));
        }
        renamed.push_back(std::move(*text));
    }
    std::vector<const std::string*> inputs;
    inputs.reserve(renamed.size());
    for (const std::string& text : renamed) inputs.push_back(&text);
    Result<compile::Compiled> link = compile::link_ptx_bundle(inputs, target);
    if (!link) {
        if (link.error().code() == Errc::kCompileFailed) return refuse(std::move(link).error());
        return std::move(link).error();
    }
    compile::Compiled linked = std::move(link).value();
    // A definition the linker kept for two members (a name the scanner did not read, so not
    // renamed) would run one member's code for another: such a bundle is not stored.
    const auto symbols = util::elf_symbols(linked.cubin);
    if (!symbols) {
        return refuse(Error(Errc::kCompileFailed, what + ": its cubin's symbols do not read: " +
                                                      symbols.error().message()));
    }
    for (const util::ElfSymbol& symbol : *symbols) {
        if (symbol.defined_for_others() && !one_members(symbol.name, ptx.size())) {
            std::string message = what;
            message += ": its cubin defines '" + symbol.name + "', no one member's own name";
            return refuse(Error(Errc::kCompileFailed, message));
        }
    }
    // Every member's parameter sizes under their names in the bundle, each once.
    compile::PtxParamSizes sizes;
    for (const std::string& module : renamed) {
        compile::PtxParamSizes own = compile::ptx_param_sizes(module);
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

Result<BundleLink> link_bundle(store::ArtifactStore& tiers, const BundlePlan& plan,
                               const std::vector<const std::string*>& ptx,
                               const compile::Target& target) {
    std::optional<util::FileLock> held;
    if (store::DiskStore* disk = tiers.disk(); disk != nullptr && !disk->read_only()) {
        held = disk->lock(plan.fingerprint, std::chrono::milliseconds(0));
        if (!held) return BundleLink::kAnotherLinks;
    }
    // A holder before this one may have stored it, or found that it does not link.
    if (const FoundBundle found = find_bundle(tiers, plan); found.artifact || found.did_not_link) {
        return found.artifact ? BundleLink::kStoredAlready : BundleLink::kDidNotLinkBefore;
    }
    TRY(make_bundle(tiers, plan, ptx, target));
    return BundleLink::kLinked;
}

}  // namespace kcache::build
