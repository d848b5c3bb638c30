// SPDX-License-Identifier: Apache-2.0
#include "build/store_step.hpp"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "build/tier_lookup.hpp"
#include "build/unique_names.hpp"
#include "compile/ptx_params.hpp"
#include "store/key_index.hpp"
#include "util/log.hpp"

namespace kcache::build {
namespace {

// The kernels a PTX module defines (".entry name("), for `kcache ls`; PTX needs no name map.
std::vector<std::string> ptx_entry_names(std::string_view ptx) {
    std::vector<std::string> names;
    for (std::size_t at = ptx.find(".entry"); at != std::string_view::npos;
         at = ptx.find(".entry", at + 6)) {
        std::size_t begin = ptx.find_first_not_of(" \t", at + 6);
        if (begin == std::string_view::npos) break;
        const std::size_t end = ptx.find_first_of(" \t\r\n(", begin);
        if (end == std::string_view::npos || end == begin) break;
        names.emplace_back(ptx.substr(begin, end - begin));
    }
    return names;
}

}  // namespace

BuiltArtifact store_compiled(store::ArtifactStore* tiers, std::string_view caller_key,
                             const BuildPlan& plan, const Source& source,
                             compile::Compiled compiled, store::remote::Lease lease,
                             store::ArtifactStore::Writing writing, std::function<void()> stored) {
    BuiltArtifact built;
    built.provenance = Provenance::kCompiled;
    built.source_bytes = plan.source_bytes;
    built.names.assign(compiled.lowered_names.begin(), compiled.lowered_names.end());
    if (plan.unique_names) built.name_suffix = unique_names_suffix(*plan.unique_names);

    store::Artifact artifact;
    artifact.kind = store::PayloadKind::kCubin;
    artifact.key = plan.key;
    artifact.key.caller_key = std::string(caller_key);
    if (source.kind == SourceKind::kPtx) {
        artifact.key.param_sizes =
            compile::param_sizes_line(compile::ptx_param_sizes(source.bytes));
        artifact.key.kernel_names = ptx_entry_names(source.bytes);
    } else {
        artifact.key.kernel_names = name_lines(built.names);
    }
    artifact.payload = std::move(compiled.cubin);
    // Loaded in place from the artifact the memory tier holds: one copy of the cubin in this
    // process (a decoded one, without tiers), shared by the tier and the loaded module.
    store::DiskStore* disk = tiers != nullptr ? tiers->disk() : nullptr;
    if (tiers != nullptr) {
        // The caller's key is recorded once the entry's write ended (whether or not it was
        // stored, as before the write went behind): a record naming an entry not written yet
        // would explain a miss with the key material of the entry it replaces.
        auto record = [disk, caller_key = std::string(caller_key), fingerprint = plan.fingerprint,
                       stored = std::move(stored)](const Result<void>&) {
            if (disk != nullptr) {
                store::KeyIndex::at(disk->cache_directory()).record(caller_key, fingerprint);
            }
            if (stored) stored();
        };
        store::Stored put =
            tiers->put(plan.fingerprint, artifact, store::DiskStore::Cleaning::kDeferred,
                       std::move(lease), writing, std::move(record));
        built.artifact = std::move(put.entry);
        if (!put.disk) built.not_stored = std::move(put.disk).error();
    } else {
        built.artifact = store::VerifiedArtifact::of(artifact);
        if (stored) stored();
    }
    if (built.artifact == nullptr) {  // key material no artifact can hold: the cubin still loads
        if (disk != nullptr && !built.not_stored) {
            built.not_stored = Error(Errc::kIoError, "its key material cannot be held by an entry");
        }
        built.loadable = Source::cubin(std::move(artifact.payload));
        return built;
    }
    built.fingerprint = plan.fingerprint;
    return built;
}

void explain_miss(store::ArtifactStore* tiers, std::string_view caller_key, const BuildPlan& plan) {
    store::DiskStore* disk = tiers != nullptr ? tiers->disk() : nullptr;
    if (disk == nullptr || !util::log_enabled(util::LogLevel::kInfo)) return;
    auto index = store::KeyIndex::at(disk->cache_directory());
    auto read = [disk](const util::Fingerprint& fingerprint) -> std::optional<store::KeyMaterial> {
        auto bytes = disk->cache_directory()->read(store::DiskStore::relative_path_of(fingerprint),
                                                   store::kMaxEntryBytes);
        if (!bytes || !*bytes) return std::nullopt;
        auto artifact = store::decode(**bytes);
        if (!artifact) return std::nullopt;
        return std::move(artifact->key);
    };
    store::KeyMaterial wanted = plan.key;
    wanted.caller_key = std::string(caller_key);
    if (std::string why = store::explain_miss(index, read, wanted, plan.fingerprint);
        !why.empty()) {
        util::log_line(util::LogLevel::kInfo, "miss for " + wanted.caller_key + ": " + why);
    }
}

}  // namespace kcache::build
