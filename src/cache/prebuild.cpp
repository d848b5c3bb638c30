// SPDX-License-Identifier: Apache-2.0
// Making an artifact without loading it: for warm_up's workers (prepare) and for a prebuild,
// which fills the tiers for an arch that needs no GPU here.
#include <string>
#include <utility>

#include "build/fingerprints.hpp"
#include "cache/loaded_modules.hpp"
#include "cache/module_loader.hpp"
#include "cache/source_guard.hpp"
#include "compile/arch.hpp"
#include "util/try.hpp"

namespace kcache::cache {

Result<PreparedArtifact> LoadedModules::prepare(std::string_view key,
                                                FunctionRef<Result<Source>()> make, int arch,
                                                bool for_load) {
    if (key.empty()) return Error(Errc::kInvalidArgument, "empty cache key");
    if (stats_flusher_) stats_flusher_->maybe_flush();
    TRY_ASSIGN(Source source, generate_source(make));
    auto built = builder_.build(key, arch, source,
                                for_load ? build::ArtifactBuilder::Asking::kLookup
                                         : build::ArtifactBuilder::Asking::kPrebuild);
    if (!built) {
        compile_failures_.fetch_add(1, std::memory_order_relaxed);
        return std::move(built).error();
    }
    compile_ns_.fetch_add(built->compile_ns, std::memory_order_relaxed);
    if (!for_load && built->provenance == Provenance::kCompiled) {
        compiles_.fetch_add(1, std::memory_order_relaxed);
        prebuild_compiles_.fetch_add(1, std::memory_order_relaxed);
    }
    if (for_load) return prepared_for_load(std::move(source), std::move(built).value(), arch);
    PreparedArtifact prepared;
    prepared.source = std::move(source);
    prepared.built = std::move(built).value();
    return prepared;
}

PreparedArtifact LoadedModules::prepared_for_load(Source source, build::BuiltArtifact built,
                                                  int arch) const {
    PreparedArtifact prepared;
    prepared.source = std::move(source);
    prepared.built = std::move(built);
    prepared.source_digest =
        build::source_digest(prepared.source, arch, prepared.built.source_bytes);
    prepared.param_sizes = ptx_param_sizes_of(
        prepared.source, recorded_param_sizes(prepared.source, prepared.built.artifact.get()));
    return prepared;
}

Result<LoadedModules::FirstLook> LoadedModules::look_in_tiers(std::string_view key,
                                                              FunctionRef<Result<Source>()> make,
                                                              int arch) {
    if (key.empty()) return Error(Errc::kInvalidArgument, "empty cache key");
    if (stats_flusher_) stats_flusher_->maybe_flush();
    TRY_ASSIGN(Source source, generate_source(make));
    auto found = builder_.find(key, arch, source);
    if (!found) {
        compile_failures_.fetch_add(1, std::memory_order_relaxed);
        return std::move(found).error();
    }
    FirstLook look;
    if (*found) {
        look.prepared = prepared_for_load(std::move(source), std::move(**found), arch);
    } else {
        look.to_compile = std::move(source);
    }
    return look;
}

Result<Provenance> LoadedModules::prebuild(std::string_view key, FunctionRef<Result<Source>()> make,
                                           int arch) {
    // Before the generator runs and any compiler sees the arch: a bad one changes nothing.
    if (auto checked = compile::check_target({arch, false}); !checked) {
        return Error(Errc::kInvalidArgument, checked.error().message());
    }
    // A prebuild is for the disk: without the tier that was asked for, it would store nothing.
    if (const auto& why = builder_.disk_open_error()) {
        return Error(Errc::kIoError,
                     "not compiled, since nothing could be stored on disk: " + why->message());
    }
    if (key.empty()) return Error(Errc::kInvalidArgument, "empty cache key");
    prebuilds_.fetch_add(1, std::memory_order_relaxed);
    TRY_ASSIGN(const PreparedArtifact prepared, prepare(key, make, arch, /*for_load=*/false));
    const build::BuiltArtifact& built = prepared.built;
    if (built.not_stored) {
        const bool compiled = built.provenance == Provenance::kCompiled;
        return Error(Errc::kIoError, std::string(compiled ? "compiled" : "found in memory") +
                                         " for sm_" + std::to_string(arch) +
                                         " but not stored on disk: " + built.not_stored->message());
    }
    if (built.provenance != Provenance::kDriverJit) return built.provenance;
    return Error(Errc::kUnsupported,
                 "PTX can only be compiled ahead of time with nvJitLink, which is not available "
                 "here (or host compilation is off)");
}

}  // namespace kcache::cache
