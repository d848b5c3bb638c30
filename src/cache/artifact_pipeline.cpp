#include "cache/artifact_pipeline.hpp"

#include <chrono>

#include "compile/compiler.hpp"
#include "driver/compiler_api.hpp"
#include "util/fingerprint.hpp"
#include "util/log.hpp"

namespace kcache::cache {
namespace {

std::uint64_t since(std::chrono::steady_clock::time_point start) {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                          std::chrono::steady_clock::now() - start)
                                          .count());
}

// Everything that decides the bytes of the artifact besides the source and arch: the host
// compiler's version and kcache's entry format. Not the driver's version: a cubin does not depend
// on it, and leaving it out is what lets a CPU-only machine fill the cache for a GPU machine.
std::string toolchain(const driver::NvJitLinkApi& jitlink) {
    return "nvJitLink " + std::to_string(jitlink.major) + "." + std::to_string(jitlink.minor) +
           "; entry format " + std::to_string(store::kFormatVersion);
}

// PTX written for arch-specific features (.target sm_90a) must be compiled for that target:
// nvJitLink refuses to build it for plain sm_90.
bool targets_arch_specific(std::string_view ptx) {
    const std::size_t at = ptx.find(".target");
    if (at == std::string_view::npos) return false;
    const std::size_t end = ptx.find_first_of("\n,", at);
    const std::string_view target =
        ptx.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at);
    const std::size_t last = target.find_last_not_of(" \t\r");
    return last != std::string_view::npos && target[last] == 'a';
}

}  // namespace

const char* origin_name(ArtifactPipeline::Origin origin) noexcept {
    switch (origin) {
        case ArtifactPipeline::Origin::kDriverJit:
            return "driver JIT";
        case ArtifactPipeline::Origin::kHostCompile:
            return "host compile";
        case ArtifactPipeline::Origin::kMemoryTier:
            return "memory tier";
        case ArtifactPipeline::Origin::kDiskTier:
            return "disk tier";
        case ArtifactPipeline::Origin::kBinary:
            return "binary";
    }
    return "unknown";
}

Result<ArtifactPipeline::Built> ArtifactPipeline::build(std::string_view key, int arch,
                                                        const Source& source) {
    auto produced = produce(key, arch, source);
    if (!produced) return std::move(produced).error();
    const auto start = std::chrono::steady_clock::now();
    auto library = driver_.load_library(produced->loadable);
    if (!library && produced->loadable.kind != source.kind) {
        // A cubin this driver cannot load (say, from a host compiler newer than the driver):
        // the source itself still may, through the driver's JIT.
        util::log_line(util::LogLevel::kInfo, "compiled artifact for " + std::string(key) +
                                                  " did not load (" + library.error().message() +
                                                  "); handing the PTX to the driver");
        produced->origin = Origin::kDriverJit;
        library = driver_.load_library(source);
    }
    if (!library) return std::move(library).error();
    std::uint64_t compile_ns = produced->compile_ns;
    // Loading PTX is the driver's JIT: that is compile time too.
    if (produced->origin == Origin::kDriverJit) compile_ns += since(start);
    return Built{*library, produced->origin, compile_ns};
}

Result<ArtifactPipeline::Produced> ArtifactPipeline::produce(std::string_view key, int arch,
                                                             const Source& source) {
    if (source.kind != SourceKind::kPtx) return Produced{source, Origin::kBinary, 0};
    const auto& jitlink = driver::nvjitlink_api();
    if (!host_compile_ || !jitlink) return Produced{source, Origin::kDriverJit, 0};

    const compile::Target target{arch, targets_arch_specific(source.bytes)};
    const util::Fingerprint source_hash = util::source_fingerprint(source, 0);
    const std::string tools = toolchain(**jitlink);
    util::FingerprintBuilder builder;
    builder.add("kcache artifact")
        .add(static_cast<std::uint64_t>(source.kind))
        .add(target.name())
        .add(tools)
        .add(source.bytes);
    const util::Fingerprint fingerprint = builder.finish();

    auto lookup = [&]() -> std::optional<Produced> {
        if (!store_) return std::nullopt;
        auto found = store_->get(fingerprint);
        if (!found) return std::nullopt;
        // The file name is the fingerprint; the recorded key material must agree with it too.
        const store::StoredEntry& stored = found->entry;
        if (stored.key.arch != target.name() || stored.key.source_hash != source_hash.hex() ||
            stored.key.toolchain != tools || stored.kind != store::PayloadKind::kCubin) {
            util::log_line(util::LogLevel::kInfo, "stored artifact for " + std::string(key) +
                                                      " has other key material; recompiling");
            return std::nullopt;
        }
        const Origin origin =
            found->tier == store::Tier::kDisk ? Origin::kDiskTier : Origin::kMemoryTier;
        return Produced{Source::cubin(std::move(found->entry.payload)), origin, 0};
    };
    if (auto hit = lookup()) return std::move(*hit);

    // Across processes: one compiles, the others wait on the lock and then find its result.
    // Held until the artifact is stored; without the lock in time, compile privately.
    std::optional<util::FileLock> lock;
    if (store_ && store_->disk() != nullptr) {
        lock = store_->disk()->lock(fingerprint, std::chrono::minutes(2));
        if (lock) {
            if (auto hit = lookup()) return std::move(*hit);
        } else {
            util::log_line(util::LogLevel::kInfo,
                           "no compile lock for " + std::string(key) + "; compiling without it");
        }
    }

    const auto start = std::chrono::steady_clock::now();
    auto linked = compile::link_ptx(source.bytes, target);
    const std::uint64_t compile_ns = since(start);
    if (!linked) return std::move(linked).error();
    if (store_) {
        store::StoredEntry entry;
        entry.kind = store::PayloadKind::kCubin;
        entry.key.arch = target.name();
        entry.key.source_kind = source_kind_name(source.kind);
        entry.key.source_hash = source_hash.hex();
        entry.key.toolchain = tools;
        entry.key.caller_key = std::string(key);
        // Key material is line-based text; a caller's key may contain anything.
        for (char& c : entry.key.caller_key) {
            if (c == '\n' || c == '\r') c = ' ';
        }
        entry.payload = linked->cubin;
        store_->put(fingerprint, entry);
    }
    return Produced{Source::cubin(std::move(linked->cubin)), Origin::kHostCompile, compile_ns};
}

}  // namespace kcache::cache
