// SPDX-License-Identifier: Apache-2.0
// A warm-up's record: which bundles (build/bundle.hpp) a warm-up of the same keys planned last,
// stored in the tiers as an entry of its own and named by the keys alone. A warm-up that finds it
// looks those bundles up and loads them while its sources are still being made and fingerprinted;
// a bundle loaded so is used only once the planned bundles name it (the plan's fingerprint is its
// members' own), so a record that is stale, or forged, costs loads, never a wrong kernel.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store/artifact_format.hpp"
#include "store/artifact_store.hpp"
#include "util/fingerprint.hpp"

namespace kcache::build {

// The most bundles a record names: more is not a record kcache wrote (a warm-up of 65,536 keys
// packs into fewer), and each one named may cost a load.
inline constexpr std::size_t kMaxRecordedBundles = 8192;

struct WarmUpRecordPlan {
    util::Fingerprint fingerprint;  // the record's, in every tier
    store::KeyMaterial key;
};
// The record of a warm-up asking for `keys` (in that order) on sm_`arch`.
WarmUpRecordPlan plan_warm_up_record(const std::vector<std::string_view>& keys, int arch);

// A record's payload: one bundle fingerprint (32 hex digits) a line, in the order given.
std::string format_bundle_list(const std::vector<util::Fingerprint>& bundles);
// Its inverse; nullopt for anything else (the text is untrusted), more than kMaxRecordedBundles
// lines included.
std::optional<std::vector<util::Fingerprint>> parse_bundle_list(std::string_view text);

// The bundles the tiers' record under `plan` names; nullopt if there is none, or what is there is
// not such a record (logged). Counts no lookup; a remote hit is kept on disk, as a bundle's is.
std::optional<std::vector<util::Fingerprint>> find_warm_up_record(store::ArtifactStore& tiers,
                                                                  const WarmUpRecordPlan& plan);
// Puts the record of `bundles` under `plan`, its disk write queued (off the caller's path).
void put_warm_up_record(store::ArtifactStore& tiers, const WarmUpRecordPlan& plan,
                        const std::vector<util::Fingerprint>& bundles);

}  // namespace kcache::build
