// SPDX-License-Identifier: Apache-2.0
#include "build/tier_lookup.hpp"

#include <algorithm>
#include <utility>

#include "build/unique_names.hpp"
#include "util/log.hpp"

namespace kcache::build {
namespace {

// A lowered name has no spaces, so the first " <- " of a name line splits it.
constexpr std::string_view kArrow = " <- ";

// Key material is line-based text; an expression may contain anything else.
std::string one_line(std::string_view text) {
    std::string line(text);
    std::replace_if(
        line.begin(), line.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
    return line;
}

// The lowered names an artifact recorded for the expressions the source asks for; nullopt if
// any is missing (then it is not the artifact wanted).
std::optional<LoweredNames> names_for(const store::KeyMaterialView& stored,
                                      const std::vector<std::string>& expressions) {
    std::vector<std::string_view> lines = stored.kernel_names();
    LoweredNames names;
    for (const auto& expression : expressions) {
        auto line = std::find_if(lines.begin(), lines.end(), [&](std::string_view text) {
            const std::size_t arrow = text.find(kArrow);
            return arrow != std::string_view::npos &&
                   text.substr(arrow + kArrow.size()) == expression;
        });
        if (line == lines.end()) return std::nullopt;
        names.emplace_back(expression, std::string(line->substr(0, line->find(kArrow))));
    }
    return names;
}

}  // namespace

std::vector<std::string> name_lines(const LoweredNames& names) {
    std::vector<std::string> lines;
    lines.reserve(names.size());
    for (const auto& [expression, lowered] : names) {
        std::string line = lowered;
        line += kArrow;
        line += expression;
        lines.push_back(one_line(line));
    }
    return lines;
}

std::optional<BuiltArtifact> find_in_tiers(store::ArtifactStore& tiers, std::string_view key,
                                           const BuildPlan& plan, const Source& source,
                                           bool& rejected) {
    auto found = tiers.find(plan.fingerprint);
    if (!found) return std::nullopt;
    // The file name is the fingerprint; the recorded key material must agree with it too. It is
    // compared as views into the artifact's bytes: no string per field on a hit.
    const store::VerifiedArtifact& artifact = *found->entry;
    const store::KeyMaterialView& stored = artifact.key();
    std::optional<LoweredNames> names = source.kind == SourceKind::kCuda
                                            ? names_for(stored, source.name_expressions)
                                            : LoweredNames{};  // PTX names its kernels itself
    if (stored.arch != plan.key.arch || stored.source_kind != plan.key.source_kind ||
        stored.source_hash != plan.key.source_hash || stored.options != plan.key.options ||
        stored.names != plan.key.names || stored.toolchain != plan.key.toolchain ||
        artifact.kind() != store::PayloadKind::kCubin || !names) {
        KCACHE_LOG(kInfo, "stored artifact for " + std::string(key) +
                              " has other key material; recompiling");
        rejected = true;
        return std::nullopt;
    }
    tiers.keep(plan.fingerprint, *found);  // a remote hit, for the disk
    BuiltArtifact built;
    built.provenance = found->tier == store::Tier::kDisk     ? Provenance::kDiskTier
                       : found->tier == store::Tier::kRemote ? Provenance::kRemoteTier
                                                             : Provenance::kMemoryTier;
    built.names = std::move(*names);
    if (plan.unique_names) built.name_suffix = unique_names_suffix(*plan.unique_names);
    // No copy of the payload: the loader loads it in place from the artifact, which the memory
    // tier and the loaded module share.
    built.artifact = std::move(found->entry);
    built.fingerprint = plan.fingerprint;
    built.source_bytes = plan.source_bytes;
    built.not_stored = std::move(found->not_on_disk);
    return built;
}

}  // namespace kcache::build
