// SPDX-License-Identifier: Apache-2.0
#include "cache/loaded_modules.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "build/fingerprints.hpp"
#include "cache/module_loader.hpp"
#include "cache/remote_options.hpp"
#include "cache/source_guard.hpp"
#include "cache/thread_counters.hpp"
#include "compile/arch.hpp"
#include "compile/ptx_params.hpp"
#include "util/epoch.hpp"
#include "util/fingerprint.hpp"
#include "util/log.hpp"
#include "util/try.hpp"

namespace kcache::cache {
namespace {

std::string describe_key(std::string_view key, int arch) {
    return std::string(key) + " (sm_" + std::to_string(arch) + ")";
}

// Single-flight identity: key and arch, NUL-separated (keys are text; a NUL in one is harmless).
std::string flight_id(std::string_view key, int arch) {
    std::string id(key);
    id.push_back('\0');
    id += std::to_string(arch);
    return id;
}

}  // namespace

bool LoadedModules::contains(std::string_view key, int arch) noexcept {
    return probe_exists(key, arch, util::hash_key(key, arch));
}

compile::PtxParamSizes LoadedModules::ptx_param_sizes_of(
    const Source& source, std::optional<compile::PtxParamSizes> stored) const {
    if (source.kind != SourceKind::kPtx || options.verify) return {};
    if (stored) return std::move(*stored);
    return compile::ptx_param_sizes(source.bytes);
}

bool LoadedModules::probe_exists(std::string_view key, int arch, std::uint64_t hash) noexcept {
    auto guard = util::EpochDomain::global().pin();
    return table_.load(std::memory_order_acquire)->find(key, arch, hash) != nullptr;
}

namespace {

// What the build layer is made of, from a cache's options.
build::BuildOptions build_options(const CacheOptions& options) {
    build::BuildOptions built;
    built.host_compile = options.host_compile;
    built.memory_bytes = options.memory_bytes;
    built.disk.directory = options.disk_directory;
    built.disk.allow_shared_directory = options.allow_shared_directory;
    built.disk.read_only = options.read_only;
    built.disk.max_bytes = options.disk_max_bytes;
    built.disk.max_files = options.disk_max_files;
    built.compile_workers = options.compile_workers;
    built.worker_command = options.compile_worker_command;
    if (auto remote = remote_options(options)) {
        built.remote = std::move(*remote);
    } else {
        util::warn_once("remote-setting", "remote tier off: " + remote.error().message());
    }
    if (built.compile_workers > CacheOptions::kMaxCompileWorkers) {
        // check() refuses it; a constructor cannot
        KCACHE_LOG(kInfo, options.check().error().message() + ": starting " +
                              std::to_string(CacheOptions::kMaxCompileWorkers));
        built.compile_workers = CacheOptions::kMaxCompileWorkers;
    }
    return built;
}

}  // namespace

LoadedModules::LoadedModules(CacheOptions options_in)
    : options(std::move(options_in)),
      driver_(options.driver ? options.driver : driver::default_driver()),
      module_counters_(std::make_shared<ModuleCounters>()),
      builder_(build_options(options)),
      bundles_(builder_.tiers(), [this](std::string_view key, const Source& source,
                                        int arch) { return make_entry(key, source, arch); }),
      table_(new ModuleTable({})) {
    for (const std::string& problem : options.configuration_problems) {
        util::warn_once("config:" + problem, "setting not used: " + problem);
    }
    // A read-only directory records no statistics: it may not be changed.
    if (const store::DiskStore* disk = builder_.tiers()->disk(); disk && !disk->read_only()) {
        stats_flusher_ = std::make_unique<StatsFlusher>(
            [this] { return stats(); }, store::PersistentStats::at(disk->cache_directory()));
    }
}

Result<void> LoadedModules::make_entry(std::string_view key, const Source& source, int arch) {
    TRY_ASSIGN(const build::BuiltArtifact built,
               builder_.build(key, arch, source, build::ArtifactBuilder::Asking::kPrebuild));
    compile_ns_.fetch_add(built.compile_ns, std::memory_order_relaxed);
    if (built.not_stored) return *built.not_stored;
    return {};
}

LoadedModules::~LoadedModules() {
    // No bundle is linked any more (a link running ends first), but the entries of bundles'
    // members queued are made; the compiles' entries still queued are written: the final flush
    // counts them.
    bundles_.finish();
    builder_.tiers()->finish_writes();
    stats_flusher_.reset();  // its final flush reads stats(), which reads table_
    std::lock_guard lock(clear_mutex);
    clear_locked();
    // No reader can be pinned on a cache being destroyed, but retired snapshots of it may wait
    // in the domain; they own nothing of ours, so leaving them to the domain is fine.
    delete table_.load(std::memory_order_acquire);
}

std::optional<ModuleHandle> LoadedModules::probe(std::string_view key, int arch,
                                                 std::uint64_t hash) noexcept {
    auto guard = util::EpochDomain::global().pin();
    LoadedModule* entry = table_.load(std::memory_order_acquire)->find(key, arch, hash);
    if (entry == nullptr) return std::nullopt;
    const std::uint32_t stripe = entry->try_acquire(util::my_stripe());
    if (stripe == LoadedModule::kNotAcquired) return std::nullopt;
    touch(*entry);
    return ModuleHandle(entry, stripe);
}

std::optional<KernelHandle> LoadedModules::find_kernel(std::string_view key, int arch,
                                                       std::string_view kernel_name) noexcept {
    const std::uint64_t hash = util::hash_key(key, arch);
    auto guard = util::EpochDomain::global().pin();
    LoadedModule* entry = table_.load(std::memory_order_acquire)->find(key, arch, hash);
    // A broken module (a deferred JIT failure, or code gone for another context) goes the slow
    // way, which drops it and builds it again. Checked, with the kernel's name, before the
    // reference is taken: the pin keeps the module's memory meanwhile, and a miss then costs no
    // reference taken and given back.
    if (entry == nullptr || entry->broken()) return std::nullopt;
    const ResolvedKernel* kernel = entry->find_kernel(kernel_name);
    if (kernel == nullptr) return std::nullopt;
    const std::uint32_t stripe = entry->try_acquire(util::my_stripe());
    if (stripe == LoadedModule::kNotAcquired) return std::nullopt;
    touch(*entry);
    hits.add();
    thread_counters().hits++;
    return KernelHandle(ModuleHandle(entry, stripe), kernel);
}

Result<ModuleHandle> LoadedModules::module_slow(std::string_view key,
                                                FunctionRef<Result<Source>()> make, int arch,
                                                std::optional<PreparedArtifact>* prepared) {
    if (key.empty()) return Error(Errc::kInvalidArgument, "empty cache key");
    const std::uint64_t hash = util::hash_key(key, arch);
    bool counted_miss = false;
    for (;;) {
        if (auto module = probe(key, arch, hash)) {
            if (module->entry_->broken()) {
                discard(*module);
                continue;
            }
            if (options.verify) {
                TRY_ASSIGN(const Source source, generate_source(make));
                auto now = build::source_digest(source, arch);
                if (now != module->entry_->source_digest) {
                    verify_failures_.fetch_add(1, std::memory_order_relaxed);
                    std::string message = "cached for sm_" + std::to_string(arch) +
                                          " from different source: cached source digest " +
                                          module->entry_->source_digest.hex() + ", this source " +
                                          now.hex();
                    KCACHE_LOG(kInfo, "key '" + std::string(key) + "': " + message);
                    return Error(Errc::kKeyConflict, message);
                }
            }
            if (!counted_miss) {
                hits.add();
                thread_counters().hits++;
            }
            return std::move(*module);
        }
        if (!counted_miss) {
            counted_miss = true;
            misses_.fetch_add(1, std::memory_order_relaxed);
            thread_counters().misses++;
            // Misses only: module() hits come through here too. No flight is held yet, so a
            // flush (an fsync, at most once a second) delays no waiter.
            if (stats_flusher_) stats_flusher_->maybe_flush();
        }

        const std::string id = flight_id(key, arch);
        auto ticket = flights_.join(id);
        if (!ticket.leader) {
            waits_.fetch_add(1, std::memory_order_relaxed);
            if (auto error = ticket.flight->wait()) return *error;
            continue;  // the leader published; look again
        }
        util::SingleFlight::Landing landing(flights_, id, ticket.flight);

        // The previous flight may have published between our probe and our join: look again
        // through the top of the loop, so that verification still applies.
        if (probe_exists(key, arch, hash)) {
            landing.succeed();
            continue;
        }
        if (prepared != nullptr && prepared->has_value()) {
            PreparedArtifact ready = std::move(**prepared);
            prepared->reset();
            auto module = load_and_publish(key, arch, hash, ready.source, &ready);
            module ? landing.succeed() : landing.fail(module.error());
            return module;
        }
        auto source = generate_source(make);
        if (!source) {
            landing.fail(source.error());
            return std::move(source).error();
        }
        auto module = load_and_publish(key, arch, hash, *source);
        module ? landing.succeed() : landing.fail(module.error());
        return module;
    }
}

void LoadedModules::retire_evicted(const std::vector<LoadedModule*>& evicted) {
    if (evicted.empty()) return;
    util::EpochDomain::Batch batch(util::EpochDomain::global());
    for (LoadedModule* victim : evicted) {
        util::log_line(util::LogLevel::kInfo, "evicted " + describe_key(victim->key, victim->arch));
        victim->retire();
    }
}

Result<ModuleHandle> LoadedModules::load_and_publish(std::string_view key, int arch,
                                                     std::uint64_t hash, const Source& source,
                                                     PreparedArtifact* prepared) {
    if (source.bytes.empty()) {
        compile_failures_.fetch_add(1, std::memory_order_relaxed);
        return Error(Errc::kInvalidArgument, "the source generator returned no bytes");
    }
    if (util::log_enabled(util::LogLevel::kInfo)) {  // no string building when silent
        util::log_line(util::LogLevel::kInfo, "miss " + describe_key(key, arch) + ": " +
                                                  source_kind_name(source.kind) + ", " +
                                                  std::to_string(source.bytes.size()) + " bytes");
    }
    // What prepare() made, and counted the time of, before the load takes it.
    const Provenance made_by =
        prepared != nullptr ? prepared->built.provenance : Provenance::kDriverJit;
    const std::uint64_t made_ns = prepared != nullptr ? prepared->built.compile_ns : 0;
    Result<LoadedCode> built = Error(Errc::kInvalidArgument, "not built");
    if (prepared != nullptr) {
        built = load_module(*driver_, builder_.tiers(), key, source, std::move(prepared->built));
    } else {
        auto artifact = builder_.build(key, arch, source);
        built = artifact
                    ? load_module(*driver_, builder_.tiers(), key, source, std::move(*artifact))
                    : Result<LoadedCode>(std::move(artifact).error());
    }
    if (!built) {
        compile_failures_.fetch_add(1, std::memory_order_relaxed);
        Error error = std::move(built).error();
        KCACHE_LOG(kInfo, "compile of " + describe_key(key, arch) + " failed: " + error.message());
        return error;
    }
    const bool compiled = built->provenance == Provenance::kDriverJit ||
                          built->provenance == Provenance::kCompiled ||
                          (prepared != nullptr && made_by == Provenance::kCompiled);
    // One compile however it went (a host compile, the driver's JIT, or the JIT after the driver
    // refused the host's cubin), as kernel() counts it; prepare() counted a host compile's time.
    if (compiled) compiles_.fetch_add(1, std::memory_order_relaxed);
    compile_ns_.fetch_add(prepared == nullptr ? built->compile_ns : built->compile_ns - made_ns,
                          std::memory_order_relaxed);
    if (util::log_enabled(util::LogLevel::kInfo)) {
        char ms[32];
        std::snprintf(ms, sizeof ms, "%.2f ms", static_cast<double>(built->compile_ns) / 1e6);
        util::log_line(util::LogLevel::kInfo, "loaded " + describe_key(key, arch) + " from " +
                                                  provenance_name(built->provenance) +
                                                  (compiled ? std::string(" in ") + ms : ""));
    }
    const driver::ModuleId loaded = built->module;

    compile::PtxParamSizes param_sizes;
    util::Fingerprint source_digest{};
    if (prepared != nullptr) {
        param_sizes = std::move(prepared->param_sizes);
        source_digest = prepared->source_digest;
    } else {
        param_sizes = ptx_param_sizes_of(source, std::move(built->param_sizes));
        source_digest = build::source_digest(source, arch, built->source_bytes);
    }
    auto* entry = new LoadedModule(std::string(key), arch, hash, source_digest, built->artifact,
                                   loaded, driver_, module_counters_, std::move(built->names),
                                   std::move(param_sizes));
    if (!built->name_suffix.empty()) entry->names_end_in(std::move(built->name_suffix));
    // Our reference is taken before the module is published, so eviction cannot unload it under
    // the caller. It is the module's home reference: hits by key allocate the striped counters.
    entry->add_ref(LoadedModule::kHomeStripe);
    ModuleHandle module(entry, LoadedModule::kHomeStripe);
    std::vector<LoadedModule*> evicted;
    {
        std::lock_guard lock(write_mutex_);
        evicted = publish(entry);
    }
    retire_evicted(evicted);
    return module;
}

}  // namespace kcache::cache

namespace kcache::cache {

Result<std::shared_ptr<const SharedCode>> LoadedModules::load_bundle_code(
    const util::Fingerprint& fingerprint, const store::Found& found) {
    TRY_ASSIGN(const driver::ModuleId loaded,
               cache::load_bundle_code(*driver_, builder_.tiers(), fingerprint, found));
    return std::make_shared<const SharedCode>(loaded, driver_);
}

Result<std::vector<std::optional<ModuleHandle>>> LoadedModules::load_bundle(
    const build::BundlePlan& plan, const store::Found& found,
    const std::vector<BundledKey>& members, int arch,
    std::optional<std::chrono::nanoseconds> linked_in, std::shared_ptr<const SharedCode> code) {
    if (linked_in) {  // the link's time, whoever publishes the keys
        compile_ns_.fetch_add(static_cast<std::uint64_t>(linked_in->count()),
                              std::memory_order_relaxed);
    }
    std::vector<std::optional<ModuleHandle>> modules(members.size());
    // The flight of each key this load publishes; a key another thread is loading, or loaded,
    // stays with it. Every landing succeeds, whatever the load does: a waiter then looks again,
    // and loads the key itself if it is still not there.
    std::vector<std::unique_ptr<util::SingleFlight::Landing>> landings(members.size());
    std::size_t led = 0;
    for (std::size_t i = 0; i < members.size(); ++i) {
        const std::string id = flight_id(members[i].key, arch);
        auto ticket = flights_.join(id);
        if (!ticket.leader) continue;
        landings[i] = std::make_unique<util::SingleFlight::Landing>(flights_, id, ticket.flight);
        landings[i]->succeed();
        if (probe_exists(members[i].key, arch, util::hash_key(members[i].key, arch))) {
            landings[i].reset();
            continue;
        }
        ++led;
    }
    if (led == 0) return modules;
    if (code == nullptr) {
        TRY_ASSIGN(code, load_bundle_code(plan.fingerprint, found));
    }
    const driver::ModuleId loaded = code->module;
    // Each member's own parameter sizes, from the bundle's line of all of them.
    const std::optional<compile::PtxParamSizes> sizes =
        options.verify ? std::nullopt
                       : compile::parse_param_sizes_line(found.entry->key().param_sizes);
    const store::ArtifactStore::Outcome outcome =
        linked_in                            ? store::ArtifactStore::Outcome::kMiss
        : found.tier == store::Tier::kMemory ? store::ArtifactStore::Outcome::kMemoryHit
        : found.tier == store::Tier::kDisk   ? store::ArtifactStore::Outcome::kDiskHit
                                             : store::ArtifactStore::Outcome::kRemoteHit;
    std::vector<LoadedModule*> evicted;
    for (std::size_t i = 0; i < members.size(); ++i) {
        if (landings[i] == nullptr) continue;
        const BundledKey& member = members[i];
        // Member i's names in the bundle end in its suffix (build::bundled_symbol).
        std::string suffix = build::bundled_symbol("", i);
        compile::PtxParamSizes own;
        if (sizes) {
            for (const auto& [name, kernel_sizes] : *sizes) {
                if (name.ends_with(suffix)) {
                    own.emplace_back(name.substr(0, name.size() - suffix.size()), kernel_sizes);
                }
            }
            // Sorted by its own names ("a$1" before "a" once both carry a suffix).
            std::sort(own.begin(), own.end(),
                      [](const auto& a, const auto& b) { return a.first < b.first; });
        }
        const std::uint64_t hash = util::hash_key(member.key, arch);
        auto* entry = new LoadedModule(
            std::string(member.key), arch, hash,
            build::source_digest(*member.source, arch, member.source_bytes), plan.fingerprint,
            loaded, driver_, module_counters_, {}, std::move(own));
        entry->share(code, std::move(suffix));
        entry->add_ref(LoadedModule::kHomeStripe);
        modules[i].emplace(ModuleHandle(entry, LoadedModule::kHomeStripe));
        misses_.fetch_add(1, std::memory_order_relaxed);
        thread_counters().misses++;
        builder_.tiers()->count(outcome);
        if (linked_in) compiles_.fetch_add(1, std::memory_order_relaxed);
        std::lock_guard lock(write_mutex_);
        std::vector<LoadedModule*> victims = publish(entry);
        evicted.insert(evicted.end(), victims.begin(), victims.end());
    }
    KCACHE_LOG(kInfo, "loaded " + std::to_string(led) + " keys (sm_" + std::to_string(arch) +
                          ") from bundle " + plan.fingerprint.hex());
    retire_evicted(evicted);
    return modules;
}

}  // namespace kcache::cache
