// SPDX-License-Identifier: Apache-2.0
#include "build/warm_up_record.hpp"

#include <cstdint>
#include <string>

#include "build/fingerprints.hpp"
#include "store/key_index.hpp"
#include "util/log.hpp"

namespace kcache::build {
namespace {

// The record's source kind (its key material's), beside a key's "ptx" or a bundle's.
constexpr const char* kRecordSourceKind = "warm-up record";
constexpr std::size_t kHexDigits = 32;

}  // namespace

WarmUpRecordPlan plan_warm_up_record(const std::vector<std::string_view>& keys, int arch) {
    util::FingerprintBuilder builder;
    builder.add("kcache warm-up record, bundles' fingerprints")
        .add(static_cast<std::uint64_t>(keys.size()));
    for (const std::string_view key : keys) builder.add(key);
    const util::Fingerprint keys_hash = builder.finish();
    WarmUpRecordPlan plan;
    plan.key.arch = "sm_" + std::to_string(arch);
    plan.key.source_kind = kRecordSourceKind;
    plan.key.source_hash = keys_hash.hex();
    plan.key.caller_key = "warm-up of " + std::to_string(keys.size()) + " keys";
    // Part of its fingerprint, as of every entry's: kcache versions of other entry formats that
    // share a directory keep records of their own rather than removing each other's as corrupt.
    plan.key.toolchain = "entry format " + std::to_string(store::kFormatVersion);
    plan.fingerprint = artifact_fingerprint(plan.key, {}, {}, keys_hash);
    return plan;
}

std::string format_bundle_list(const std::vector<util::Fingerprint>& bundles) {
    std::string text;
    text.reserve(bundles.size() * (kHexDigits + 1));
    for (const util::Fingerprint& bundle : bundles) {
        text += bundle.hex();
        text += '\n';
    }
    return text;
}

std::optional<std::vector<util::Fingerprint>> parse_bundle_list(std::string_view text) {
    if (text.size() % (kHexDigits + 1) != 0 ||
        text.size() / (kHexDigits + 1) > kMaxRecordedBundles) {
        return std::nullopt;
    }
    std::vector<util::Fingerprint> bundles;
    bundles.reserve(text.size() / (kHexDigits + 1));
    for (std::size_t at = 0; at < text.size(); at += kHexDigits + 1) {
        if (text[at + kHexDigits] != '\n') return std::nullopt;
        const auto bundle = store::parse_fingerprint(text.substr(at, kHexDigits));
        if (!bundle) return std::nullopt;
        bundles.push_back(*bundle);
    }
    return bundles;
}

std::optional<std::vector<util::Fingerprint>> find_warm_up_record(store::ArtifactStore& tiers,
                                                                  const WarmUpRecordPlan& plan) {
    const std::optional<store::Found> found = tiers.find(plan.fingerprint);
    if (!found) return std::nullopt;
    const store::KeyMaterialView& stored = found->entry->key();
    std::optional<std::vector<util::Fingerprint>> bundles;
    if (stored.source_kind == plan.key.source_kind && stored.arch == plan.key.arch &&
        stored.source_hash == plan.key.source_hash && stored.toolchain == plan.key.toolchain &&
        found->entry->kind() == store::PayloadKind::kPtx) {
        bundles = parse_bundle_list(found->entry->payload());
    }
    if (!bundles) {
        KCACHE_LOG(kInfo, "warm-up record " + plan.fingerprint.hex() +
                              " is not one kcache wrote for these keys; not used");
        return std::nullopt;
    }
    tiers.keep(plan.fingerprint, *found);  // a remote hit, for the disk
    return bundles;
}

void put_warm_up_record(store::ArtifactStore& tiers, const WarmUpRecordPlan& plan,
                        const std::vector<util::Fingerprint>& bundles) {
    store::Artifact record;
    record.kind = store::PayloadKind::kPtx;  // text: the bundles' fingerprints
    record.key = plan.key;
    record.payload = format_bundle_list(bundles);
    (void)tiers.put(plan.fingerprint, record, store::DiskStore::Cleaning::kDeferred, {},
                    store::ArtifactStore::Writing::kBehind);
}

}  // namespace kcache::build
