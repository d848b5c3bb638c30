// SPDX-License-Identifier: Apache-2.0
#include "build/fingerprints.hpp"

#include <algorithm>
#include <cstdint>
#include <utility>

namespace kcache::build {

util::Fingerprint source_hash(const Source& source, const util::Fingerprint& bytes) {
    util::FingerprintBuilder builder;
    builder.add(static_cast<std::uint64_t>(source.kind)).add(bytes.high).add(bytes.low);
    std::vector<const std::pair<std::string, std::string>*> headers;
    for (const auto& header : source.headers) headers.push_back(&header);
    std::sort(headers.begin(), headers.end(), [](auto* a, auto* b) { return a->first < b->first; });
    builder.add(static_cast<std::uint64_t>(headers.size()));
    for (const auto* header : headers) builder.add(header->first).add(header->second);
    return builder.finish();
}

util::Fingerprint artifact_fingerprint(const store::KeyMaterial& key,
                                       const std::vector<std::string>& normalized_options,
                                       const std::vector<std::string>& sorted_expressions,
                                       const util::Fingerprint& source_hash) {
    util::FingerprintBuilder builder;
    builder.add("kcache artifact")
        .add(key.source_kind)
        .add(key.arch)
        .add(key.toolchain)
        .add(static_cast<std::uint64_t>(normalized_options.size()));
    for (const auto& option : normalized_options) builder.add(option);
    builder.add(static_cast<std::uint64_t>(sorted_expressions.size()));
    for (const auto& expression : sorted_expressions) builder.add(expression);
    builder.add(source_hash.high).add(source_hash.low);
    return builder.finish();
}

util::Fingerprint source_digest(const Source& source, int arch,
                                const std::optional<util::Fingerprint>& bytes) {
    const util::Fingerprint hash = bytes ? *bytes : util::bytes_hash(source.bytes);
    util::FingerprintBuilder builder;
    builder.add(static_cast<std::uint64_t>(source.kind))
        .add(static_cast<std::uint64_t>(arch))
        .add(hash.high)
        .add(hash.low);
    // Exactly as given: verification asks whether the generator still returns the same thing.
    if (source.kind == SourceKind::kCuda) {
        builder.add(static_cast<std::uint64_t>(source.headers.size()));
        for (const auto& [name, text] : source.headers) builder.add(name).add(text);
        builder.add(static_cast<std::uint64_t>(source.options.size()));
        for (const auto& option : source.options) builder.add(option);
        builder.add(static_cast<std::uint64_t>(source.name_expressions.size()));
        for (const auto& expression : source.name_expressions) builder.add(expression);
    }
    builder.add(static_cast<std::uint64_t>(source.arch_specific));
    return builder.finish();
}

util::Fingerprint built_from(const store::VerifiedArtifact& artifact) {
    const store::KeyMaterialView& key = artifact.key();
    util::FingerprintBuilder builder;
    builder.add(static_cast<std::uint64_t>(artifact.kind()))
        .add(key.arch)
        .add(key.source_kind)
        .add(key.source_hash)
        .add(key.options)
        .add(key.names)
        .add(key.toolchain);
    return builder.finish();
}

}  // namespace kcache::build
