#include "cache/artifact_pipeline.hpp"

#include <string.h>

#include <algorithm>
#include <chrono>

#include "compile/arch.hpp"
#include "compile/options.hpp"
#include "store/key_index.hpp"
#include "util/log.hpp"

namespace kcache::cache {
namespace {

std::uint64_t since(std::chrono::steady_clock::time_point start) {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                          std::chrono::steady_clock::now() - start)
                                          .count());
}

// PTX written for arch-specific features (.target sm_90a) must be compiled for that target:
// nvJitLink refuses to build it for plain sm_90.
bool targets_arch_specific(std::string_view ptx) {
    // memmem, not string_view::find: PTX has a '.' on every line, which find's first-character
    // scan stops at (measured at a tenth of a warm start's own cost).
    const void* found = memmem(ptx.data(), ptx.size(), ".target", 7);
    if (found == nullptr) return false;
    const std::size_t at = static_cast<std::size_t>(static_cast<const char*>(found) - ptx.data());
    const std::size_t end = ptx.find_first_of("\n,", at);
    const std::string_view target =
        ptx.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at);
    const std::size_t last = target.find_last_not_of(" \t\r");
    return last != std::string_view::npos && target[last] == 'a';
}

// The source's own bytes: the code and, for CUDA C++, its headers by name (their order in the
// list does not change what compiles).
util::Fingerprint source_hash_of(const Source& source, const util::Fingerprint& bytes) {
    util::FingerprintBuilder builder;
    builder.add(static_cast<std::uint64_t>(source.kind)).add(bytes.high).add(bytes.low);
    std::vector<const std::pair<std::string, std::string>*> headers;
    for (const auto& header : source.headers) headers.push_back(&header);
    std::sort(headers.begin(), headers.end(), [](auto* a, auto* b) { return a->first < b->first; });
    builder.add(static_cast<std::uint64_t>(headers.size()));
    for (const auto* header : headers) builder.add(header->first).add(header->second);
    return builder.finish();
}

// Key material is line-based text; a caller's key may contain anything.
std::string one_line(std::string_view key) {
    std::string line(key);
    for (char& c : line) {
        if (c == '\n' || c == '\r') c = ' ';
    }
    return line;
}

std::vector<std::string> sorted(std::vector<std::string> values) {
    std::sort(values.begin(), values.end());
    values.erase(std::unique(values.begin(), values.end()), values.end());
    return values;
}

// An ELF of type ET_EXEC (2), which the driver loads as it is.
bool is_executable_cubin(std::string_view cubin) {
    return cubin.size() > 17 &&
           cubin.starts_with(
               "\x7f"
               "ELF") &&
           cubin[16] == 2 && cubin[17] == 0;
}

// Kernel-name lines of the key material: "<lowered> <- <expression>". A lowered name has no
// spaces, so the first " <- " splits it.
constexpr std::string_view kArrow = " <- ";

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

// The lowered names a stored entry recorded for the expressions the source asks for; nullopt if
// any is missing (then the entry is not the one wanted).
std::optional<LoweredNames> names_for(const std::vector<std::string>& lines,
                                      const std::vector<std::string>& expressions) {
    LoweredNames names;
    for (const auto& expression : expressions) {
        auto line = std::find_if(lines.begin(), lines.end(), [&](const std::string& text) {
            const std::size_t arrow = text.find(kArrow);
            return arrow != std::string::npos && text.substr(arrow + kArrow.size()) == expression;
        });
        if (line == lines.end()) return std::nullopt;
        names.emplace_back(expression, line->substr(0, line->find(kArrow)));
    }
    return names;
}

// What an entry was built from, as the fingerprint covers it (not the caller's key, nor the
// kernel names recorded with it): two entries equal here hold the same kernels.
util::Fingerprint built_from(const store::DecodedEntry& entry) {
    const store::KeyMaterialView& key = entry.key();
    util::FingerprintBuilder builder;
    builder.add(static_cast<std::uint64_t>(entry.kind()))
        .add(key.arch)
        .add(key.source_kind)
        .add(key.source_hash)
        .add(key.options)
        .add(key.names)
        .add(key.toolchain);
    return builder.finish();
}

// A disk hit's way back to its bytes, for a load into another context after the driver let
// them go: the entry under the same fingerprint, through the tiers, built from the same inputs
// as the one loaded (checked, as a lookup checks its key material). It may have been written
// again since, by a process that asked under another key, and still holds the same kernels.
// Holds the store weakly: loaded code may outlive its cache, and must not keep the tiers alive.
driver::ImageSource read_back(const std::shared_ptr<store::ArtifactStore>& store,
                              const util::Fingerprint& fingerprint,
                              const store::DecodedEntry& loaded) {
    return [weak = std::weak_ptr<store::ArtifactStore>(store), fingerprint,
            inputs = built_from(loaded)]() -> Result<driver::Image> {
        auto tiers = weak.lock();
        if (!tiers) {
            return Error(Errc::kArtifactGone, "the cache that loaded entry " + fingerprint.hex() +
                                                  " is gone, and with it the way to its bytes");
        }
        auto entry = tiers->read_back(fingerprint);
        if (entry == nullptr) {
            return Error(Errc::kArtifactGone,
                         "entry " + fingerprint.hex() + " is no longer in the cache's tiers");
        }
        if (built_from(*entry) != inputs) {
            return Error(Errc::kArtifactGone,
                         "entry " + fingerprint.hex() + " now holds what other inputs built");
        }
        const std::string_view payload = entry->payload();
        return driver::Image{payload, std::move(entry)};
    };
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
    return load(key, source, std::move(*produced));
}

std::optional<compile::PtxParamSizes> ArtifactPipeline::stored_param_sizes(
    const Source& source, const store::DecodedEntry* stored) {
    if (source.kind != SourceKind::kPtx || stored == nullptr) return std::nullopt;
    return compile::parse_param_sizes_line(stored->key().param_sizes);
}

Result<ArtifactPipeline::Built> ArtifactPipeline::load(std::string_view key, const Source& source,
                                                       Produced produced) {
    const auto start = std::chrono::steady_clock::now();
    // Read before the driver may let the entry go.
    std::optional<compile::PtxParamSizes> param_sizes =
        stored_param_sizes(source, produced.stored.get());
    const bool compiled_here = produced.stored != nullptr || produced.loadable.kind != source.kind;
    Result<driver::LibraryId> library = Error(Errc::kInvalidArgument, "not loaded");
    if (produced.stored != nullptr) {
        // A disk hit is kept by no tier: the driver may let its bytes go and read them back.
        const bool from_disk = produced.origin == Origin::kDiskTier;
        const std::string_view payload = produced.stored->payload();
        driver::ImageSource again = from_disk
                                        ? read_back(store_, produced.fingerprint, *produced.stored)
                                        : driver::ImageSource();
        library = driver_.load_binary(driver::Image{payload, std::move(produced.stored)},
                                      std::move(again));
    } else if (produced.loadable.kind == SourceKind::kCubin ||
               produced.loadable.kind == SourceKind::kFatbin) {
        // A caller's binary: its bytes, moved here, are the ones a library made later uses.
        auto bytes = std::make_shared<const std::string>(std::move(produced.loadable.bytes));
        const std::string_view view = *bytes;
        library = driver_.load_binary(driver::Image{view, std::move(bytes)}, {});
    } else {
        library = driver_.load_library(produced.loadable);
    }
    if (!library && source.kind == SourceKind::kPtx && compiled_here) {
        // A cubin this driver cannot load (say, from a host compiler newer than the driver):
        // the source itself still may, through the driver's JIT.
        util::log_line(util::LogLevel::kInfo, "compiled artifact for " + std::string(key) +
                                                  " did not load (" + library.error().message() +
                                                  "); handing the PTX to the driver");
        produced.origin = Origin::kDriverJit;
        library = driver_.load_library(source);
    }
    if (!library) return std::move(library).error();
    std::uint64_t compile_ns = produced.compile_ns;
    // Loading PTX is the driver's JIT: that is compile time too.
    if (produced.origin == Origin::kDriverJit) compile_ns += since(start);
    return Built{*library,
                 produced.origin,
                 compile_ns,
                 std::move(produced.names),
                 produced.source_bytes,
                 std::move(param_sizes)};
}

Result<std::optional<ArtifactPipeline::Recipe>> ArtifactPipeline::plan(int arch,
                                                                       const Source& source) const {
    Recipe recipe;
    std::string toolchain;
    std::vector<std::string> options;
    if (source.kind == SourceKind::kPtx) {
        if (!host_compile_) return std::optional<Recipe>();
        const auto& identity = compile::ptx_compiler_identity();
        if (!identity) return std::optional<Recipe>();  // the driver's JIT takes it
        toolchain = *identity;
        recipe.target = compile::Target{arch, targets_arch_specific(source.bytes)};
        if (auto checked = compile::check_target(recipe.target); !checked) {
            // The device's own arch (a prebuild checked its arch before): its driver JITs it.
            util::log_line(util::LogLevel::kInfo,
                           checked.error().message() + "; PTX goes to the driver's JIT");
            return std::optional<Recipe>();
        }
    } else if (source.kind == SourceKind::kCuda) {
        const auto& identity = compile::cuda_compiler_identity();
        if (!identity) {
            return Error(Errc::kUnsupported,
                         "CUDA C++ needs NVRTC, which is not here: " + identity.error().message(),
                         identity.error().log());
        }
        toolchain = *identity;  // names compile_cuda's own NVRTC options too
        auto normalized = compile::normalize_options(source.options);
        if (!normalized) return std::move(normalized).error();
        for (const auto& expression : source.name_expressions) {
            if (expression.empty() || expression.find_first_of("\r\n") != std::string::npos) {
                return Error(Errc::kInvalidArgument,
                             "name expression '" + expression + "' is empty or spans lines");
            }
        }
        std::vector<std::string> names;
        for (const auto& [name, text] : source.headers) names.push_back(name);
        std::sort(names.begin(), names.end());
        if (auto twice = std::adjacent_find(names.begin(), names.end()); twice != names.end()) {
            return Error(Errc::kInvalidArgument,
                         "header '" + *twice +
                             "' is given twice: which one NVRTC uses is not "
                             "defined");
        }
        options = std::move(*normalized);
        // Not an NVRTC option: a compile that read unfingerprinted headers is kept apart.
        if (source.allow_disk_headers) options.emplace_back("[disk headers not fingerprinted]");
        recipe.target = compile::Target{arch, source.arch_specific};
        if (auto checked = compile::check_target(recipe.target); !checked) return checked.error();
    } else {
        return std::optional<Recipe>();  // a binary: nothing to compile
    }
    // A cubin does not depend on the driver's version, so it stays out: that is what lets a
    // CPU-only machine fill the cache for a GPU machine.
    toolchain.append("; entry format ").append(std::to_string(store::kFormatVersion));

    recipe.source_bytes = util::bytes_hash(source.bytes);
    const util::Fingerprint source_hash = source_hash_of(source, recipe.source_bytes);
    recipe.key.arch = recipe.target.name();
    recipe.key.source_kind = source_kind_name(source.kind);
    recipe.key.source_hash = source_hash.hex();
    recipe.key.options = compile::options_line(options);
    recipe.key.toolchain = std::move(toolchain);

    util::FingerprintBuilder builder;
    builder.add("kcache artifact")
        .add(recipe.key.source_kind)
        .add(recipe.key.arch)
        .add(recipe.key.toolchain)
        .add(static_cast<std::uint64_t>(options.size()));
    for (const auto& option : options) builder.add(option);
    // Only CUDA C++ has name expressions; PTX names its kernels itself.
    const auto expressions = source.kind == SourceKind::kCuda ? sorted(source.name_expressions)
                                                              : std::vector<std::string>{};
    builder.add(static_cast<std::uint64_t>(expressions.size()));
    for (const auto& expression : expressions) {
        builder.add(expression);
        if (!recipe.key.names.empty()) recipe.key.names += "; ";
        recipe.key.names += expression;
    }
    builder.add(source_hash.high).add(source_hash.low);
    recipe.fingerprint = builder.finish();
    return std::optional<Recipe>(std::move(recipe));
}

std::optional<ArtifactPipeline::Produced> ArtifactPipeline::lookup(std::string_view key,
                                                                   const Recipe& recipe,
                                                                   const Source& source,
                                                                   bool& rejected) {
    if (!store_) return std::nullopt;
    auto found = store_->find(recipe.fingerprint);
    if (!found) return std::nullopt;
    // The file name is the fingerprint; the recorded key material must agree with it too. It is
    // compared as views into the entry's bytes: no string per field on a hit.
    const store::DecodedEntry& entry = *found->entry;
    const store::KeyMaterialView& stored = entry.key();
    std::optional<LoweredNames> names;
    if (source.kind == SourceKind::kCuda) {
        std::vector<std::string> lines;
        for (std::string_view line : stored.kernel_names()) lines.emplace_back(line);
        names = names_for(lines, source.name_expressions);
    } else {
        names.emplace();  // PTX names its kernels itself
    }
    if (stored.arch != recipe.key.arch || stored.source_kind != recipe.key.source_kind ||
        stored.source_hash != recipe.key.source_hash || stored.options != recipe.key.options ||
        stored.names != recipe.key.names || stored.toolchain != recipe.key.toolchain ||
        entry.kind() != store::PayloadKind::kCubin || !names) {
        util::log_line(util::LogLevel::kInfo, "stored artifact for " + std::string(key) +
                                                  " has other key material; recompiling");
        rejected = true;
        return std::nullopt;
    }
    const Origin origin =
        found->tier == store::Tier::kDisk ? Origin::kDiskTier : Origin::kMemoryTier;
    // No copy of the payload: build() loads it in place from the entry, which the memory tier
    // and the loaded library share.
    return Produced{Source{},
                    origin,
                    0,
                    std::move(*names),
                    std::move(found->entry),
                    recipe.fingerprint,
                    recipe.source_bytes,
                    std::move(found->not_on_disk)};
}

Result<ArtifactPipeline::Produced> ArtifactPipeline::produce(std::string_view key, int arch,
                                                             const Source& source, Asking asking) {
    auto planned = plan(arch, source);
    if (!planned) return std::move(planned).error();
    if (!*planned) {
        const Origin origin =
            source.kind == SourceKind::kPtx ? Origin::kDriverJit : Origin::kBinary;
        return Produced{source, origin, 0, {}, nullptr};
    }
    bool rejected = false;
    auto produced = produce_planned(key, **planned, source, rejected);
    if (asking == Asking::kLookup && store_) {
        // One outcome per lookup, from where the artifact came: the tiers may have been read
        // twice (before and after the compile lock, or after waiting for another thread).
        using Outcome = store::ArtifactStore::Outcome;
        Outcome outcome = rejected ? Outcome::kRejected : Outcome::kMiss;
        if (produced && produced->origin == Origin::kMemoryTier) outcome = Outcome::kMemoryHit;
        if (produced && produced->origin == Origin::kDiskTier) outcome = Outcome::kDiskHit;
        store_->count(outcome);
    }
    return produced;
}

Result<ArtifactPipeline::Produced> ArtifactPipeline::produce_planned(std::string_view key,
                                                                     const Recipe& recipe,
                                                                     const Source& source,
                                                                     bool& rejected) {
    if (auto hit = lookup(key, recipe, source, rejected)) return std::move(*hit);

    // Within this process: one thread compiles a fingerprint, the others wait and look again.
    const std::string flight_id = recipe.fingerprint.hex();
    auto ticket = flights_.join(flight_id);
    if (!ticket.leader) {
        if (auto error = ticket.flight->wait()) return *error;
        if (auto hit = lookup(key, recipe, source, rejected)) return std::move(*hit);
        // Not kept in a tier (none, or too big for memory): the leader's own result.
        if (auto value = std::static_pointer_cast<const Produced>(ticket.flight->value())) {
            return Produced{value->loadable,     Origin::kMemoryTier, 0,
                            value->names,        value->stored,       value->fingerprint,
                            value->source_bytes, value->not_stored};
        }
        return compile_and_store(key, recipe, source, rejected);
    }
    std::optional<Error> failure = Error(Errc::kSourceFailed, "the compile was abandoned");
    std::shared_ptr<const void> value;
    struct Landing {
        SingleFlight& flights;
        const std::string& id;
        const std::shared_ptr<SingleFlight::Flight>& flight;
        std::optional<Error>& failure;
        std::shared_ptr<const void>& value;
        ~Landing() { flights.finish(id, flight, std::move(failure), std::move(value)); }
    } landing{flights_, flight_id, ticket.flight, failure, value};
    auto produced = compile_and_store(key, recipe, source, rejected);
    if (produced) {
        failure.reset();
        // For waiters the tiers could not serve (none, or a memory budget smaller than the
        // cubin); one copy of a cubin per compile, small beside the compile.
        value = std::make_shared<const Produced>(*produced);
    } else {
        failure = produced.error();
    }
    return produced;
}

Result<ArtifactPipeline::Produced> ArtifactPipeline::compile_and_store(std::string_view key,
                                                                       const Recipe& recipe,
                                                                       const Source& source,
                                                                       bool& rejected) {
    // Across processes: one compiles, the others wait on the lock and then find its result.
    // Held until the artifact is stored; without the lock in time, compile privately.
    // A holder that stops stamping its lock (stopped, hung) is not waited for: FileLock gives up
    // after a few heartbeats and says whom it waited for; a duplicate compile is safe.
    std::optional<util::FileLock> lock;
    if (store_ && store_->disk() != nullptr) {
        const auto asked = std::chrono::steady_clock::now();
        lock = store_->disk()->lock(recipe.fingerprint, std::chrono::minutes(2));
        if (lock) {
            if (auto hit = lookup(key, recipe, source, rejected)) return std::move(*hit);
        } else {
            util::log_line(util::LogLevel::kInfo, "no compile lock for " + one_line(key) + " (" +
                                                      recipe.fingerprint.hex() + ") after " +
                                                      std::to_string(since(asked) / 1000000) +
                                                      " ms; compiling without it");
        }
    }

    const std::string caller_key = one_line(key);
    store::DiskStore* disk = store_ ? store_->disk() : nullptr;
    if (disk != nullptr && util::log_enabled(util::LogLevel::kInfo)) {
        // Why this is a miss: what differs from the entry last stored under this key.
        auto index = store::KeyIndex::at(disk->cache_directory());
        auto read =
            [disk](const util::Fingerprint& fingerprint) -> std::optional<store::KeyMaterial> {
            auto bytes = disk->cache_directory()->read(
                store::DiskStore::relative_path_of(fingerprint), store::kMaxEntryBytes);
            if (!bytes || !*bytes) return std::nullopt;
            auto entry = store::decode(**bytes);
            if (!entry) return std::nullopt;
            return std::move(entry->key);
        };
        store::KeyMaterial wanted = recipe.key;
        wanted.caller_key = caller_key;
        if (std::string why = store::explain_miss(index, read, wanted, recipe.fingerprint);
            !why.empty()) {
            util::log_line(util::LogLevel::kInfo, "miss for " + caller_key + ": " + why);
        }
    }

    const auto start = std::chrono::steady_clock::now();
    Result<compile::Compiled> compiled = Error(Errc::kUnsupported, "no compiler");
    if (source.kind == SourceKind::kCuda) {
        compile::CudaProgram program;
        program.code = source.bytes;
        program.headers = source.headers;
        program.options = source.options;
        program.name_expressions = source.name_expressions;
        program.allow_disk_headers = source.allow_disk_headers;
        if (workers_ && workers_->usable_here()) {
            compiled = workers_->compile_cuda(program, recipe.target);
            if (!compiled && compiled.error().code() == Errc::kIoError) {
                // The workers failed, not the compile: this process can still do it.
                util::warn_once("workers-failed", "compile workers failed (" +
                                                      compiled.error().message() +
                                                      "); compiling in this process");
                compiled = compile::compile_cuda(program, recipe.target);
            }
        } else {
            compiled = compile::compile_cuda(program, recipe.target);
        }
    } else {
        compiled = compile::link_ptx(source.bytes, recipe.target);
        if (!compiled && compiled.error().code() == Errc::kUnsupported) {
            // nvJitLink was found but cannot be used (say, another CUDA major's): the driver's
            // JIT still can, as it did before there was a host compiler.
            util::warn_once("nvjitlink", "nvJitLink unusable (" + compiled.error().message() +
                                             "); PTX goes to the driver's JIT");
            return Produced{source, Origin::kDriverJit, 0, {}, nullptr};
        }
    }
    const std::uint64_t compile_ns = since(start);
    if (!compiled) return std::move(compiled).error();
    // Only an executable cubin loads on its own: relocatable output (-dc and the like) must not
    // be stored, where it would fail every later load.
    if (!is_executable_cubin(compiled->cubin)) {
        return Error(Errc::kCompileFailed,
                     "the compiler made a relocatable or otherwise non-executable cubin (an "
                     "option like -dc or -rdc true?); nothing was stored",
                     compiled->log);
    }
    LoweredNames names(compiled->lowered_names.begin(), compiled->lowered_names.end());
    store::StoredEntry entry;
    entry.kind = store::PayloadKind::kCubin;
    entry.key = recipe.key;
    entry.key.caller_key = caller_key;
    if (source.kind == SourceKind::kPtx) {
        entry.key.param_sizes = compile::param_sizes_line(compile::ptx_param_sizes(source.bytes));
    }
    entry.key.kernel_names =
        source.kind == SourceKind::kPtx ? ptx_entry_names(source.bytes) : name_lines(names);
    entry.payload = std::move(compiled->cubin);
    // Loaded in place from the entry the memory tier holds: one copy of the cubin in this process
    // (a decoded one, without tiers), shared by the tier and the loaded code.
    std::shared_ptr<const store::DecodedEntry> stored;
    std::optional<Error> not_stored;
    if (store_) {
        store::Stored put =
            store_->put(recipe.fingerprint, entry, store::DiskStore::Cleaning::kDeferred);
        stored = std::move(put.entry);
        if (!put.disk) not_stored = std::move(put.disk).error();
        if (disk != nullptr)
            store::KeyIndex::at(disk->cache_directory()).record(caller_key, recipe.fingerprint);
    } else {
        stored = store::DecodedEntry::of(entry);
    }
    // Stored: the processes waiting on the lock can go; a due cleanup runs after they do.
    lock.reset();
    if (disk != nullptr) disk->run_pending_cleanup();
    if (stored == nullptr) {  // key material no entry can hold: the cubin still loads, as it is
        if (disk != nullptr && !not_stored) {
            not_stored = Error(Errc::kIoError, "its key material cannot be held by an entry");
        }
        return Produced{Source::cubin(std::move(entry.payload)),
                        Origin::kHostCompile,
                        compile_ns,
                        std::move(names),
                        nullptr,
                        {},
                        recipe.source_bytes,
                        std::move(not_stored)};
    }
    return Produced{
        Source{},          Origin::kHostCompile, compile_ns,          std::move(names),
        std::move(stored), recipe.fingerprint,   recipe.source_bytes, std::move(not_stored)};
}

}  // namespace kcache::cache
