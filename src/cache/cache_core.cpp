#include "cache/cache_core.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "cache/thread_counters.hpp"
#include "compile/arch.hpp"
#include "compile/ptx_params.hpp"
#include "util/epoch.hpp"
#include "util/fingerprint.hpp"
#include "util/log.hpp"

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

// Runs the caller's generator. An exception from it becomes kSourceFailed: none crosses the API.
Result<Source> generate(std::string_view key, FunctionRef<Result<Source>()> make) {
    auto failed = [&](const std::string& why, const std::string& log) {
        return Error(Errc::kSourceFailed,
                     "key '" + std::string(key) + "': source generator failed: " + why, log);
    };
    try {
        auto source = make();
        if (!source) return failed(source.error().message(), source.error().log());
        return source;
    } catch (const std::exception& e) {
        return failed(std::string("threw: ") + e.what(), {});
    } catch (...) {
        return failed("threw a non-standard exception", {});
    }
}

}  // namespace

bool CacheCore::contains(std::string_view key, int arch) noexcept {
    return probe_exists(key, arch, util::hash_key(key, arch));
}

compile::PtxParamSizes CacheCore::ptx_param_sizes_of(
    const Source& source, std::optional<compile::PtxParamSizes> stored) const {
    if (source.kind != SourceKind::kPtx || options.verify) return {};
    if (stored) return std::move(*stored);
    return compile::ptx_param_sizes(source.bytes);
}

bool CacheCore::probe_exists(std::string_view key, int arch, std::uint64_t hash) noexcept {
    auto guard = util::EpochDomain::global().pin();
    return table_.load(std::memory_order_acquire)->find(key, arch, hash) != nullptr;
}

namespace {

// The tiers for a cache's options. A disk directory that cannot be used is logged and leaves the
// memory tier alone working; `disk_errors` counts it and `why` keeps the reason, for prebuild().
std::shared_ptr<store::ArtifactStore> make_store(const CacheOptions& options,
                                                 std::atomic<std::uint64_t>& disk_errors,
                                                 std::optional<Error>& why) {
    std::unique_ptr<store::DiskStore> disk;
    if (!options.disk_directory.empty()) {
        store::DiskOptions disk_options;
        disk_options.directory = options.disk_directory;
        disk_options.allow_shared_directory = options.allow_shared_directory;
        disk_options.read_only = options.read_only;
        disk_options.max_bytes = options.disk_max_bytes;
        disk_options.max_files = options.disk_max_files;
        auto opened = store::DiskStore::open(disk_options);
        if (opened) {
            disk = std::move(*opened);
        } else {
            disk_errors.fetch_add(1, std::memory_order_relaxed);
            why = opened.error();
            util::warn_once("disk-open:" + options.disk_directory,
                            "disk tier off, working from memory: " + opened.error().message());
        }
    }
    return std::make_shared<store::ArtifactStore>(options.memory_bytes, std::move(disk));
}

// Worker processes for CUDA C++ when asked for; null (compile in this process) otherwise, or when
// no worker command can be used.
std::shared_ptr<compile::WorkerPool> make_workers(const CacheOptions& options) {
    if (options.compile_workers == 0) return nullptr;
    const std::string command = options.compile_worker_command.empty()
                                    ? compile::default_worker_command()
                                    : options.compile_worker_command;
    if (command.empty()) {
        util::warn_once("workers",
                        "no compile worker command (set KCACHE_COMPILE_WORKER): compiling CUDA C++ "
                        "in this process");
        return nullptr;
    }
    std::size_t workers = options.compile_workers;
    if (workers > CacheOptions::kMaxCompileWorkers) {  // check() refuses it; a constructor cannot
        util::log_line(util::LogLevel::kInfo, options.check().error().message() + ": starting " +
                                                  std::to_string(CacheOptions::kMaxCompileWorkers));
        workers = CacheOptions::kMaxCompileWorkers;
    }
    auto pool = compile::WorkerPool::start(command, {"compile-worker"}, workers);
    if (!pool) {
        util::warn_once("workers",
                        "compile workers off, compiling in this process: " + pool.error().message());
        return nullptr;
    }
    return std::shared_ptr<compile::WorkerPool>(std::move(*pool));
}

}  // namespace

CacheCore::CacheCore(CacheOptions options_in)
    : options(std::move(options_in)),
      driver_(options.driver ? options.driver : driver::default_driver()),
      library_counters_(std::make_shared<LibraryCounters>()),
      pipeline_(*driver_, make_store(options, disk_open_errors_, disk_open_error_),
                options.host_compile, make_workers(options)),
      table_(new EntryTable({})) {
    for (const std::string& problem : options.configuration_problems) {
        util::warn_once("config:" + problem, "setting not used: " + problem);
    }
    // A read-only directory records no statistics: it may not be changed.
    if (const store::ArtifactStore* tiers = pipeline_.store();
        tiers && tiers->disk() && !tiers->disk()->read_only()) {
        stats_flusher_ = std::make_unique<StatsFlusher>(
            [this] { return stats(); },
            store::PersistentStats::at(tiers->disk()->cache_directory()));
    }
}

CacheCore::~CacheCore() {
    stats_flusher_.reset();  // its final flush reads stats(), which reads table_
    std::lock_guard lock(clear_mutex);
    clear_locked();
    // No reader can be pinned on a cache being destroyed, but retired snapshots of it may wait
    // in the domain; they own nothing of ours, so leaving them to the domain is fine.
    delete table_.load(std::memory_order_acquire);
}

std::optional<ModuleHandle> CacheCore::probe(std::string_view key, int arch,
                                             std::uint64_t hash) noexcept {
    auto guard = util::EpochDomain::global().pin();
    Entry* entry = table_.load(std::memory_order_acquire)->find(key, arch, hash);
    if (entry == nullptr) return std::nullopt;
    const std::optional<std::uint32_t> stripe = entry->try_acquire(util::my_stripe());
    if (!stripe) return std::nullopt;
    const std::uint64_t now = tick_.load(std::memory_order_relaxed);
    if (entry->last_used.load(std::memory_order_relaxed) != now) {
        entry->last_used.store(now, std::memory_order_relaxed);
    }
    return ModuleHandle(entry, *stripe);
}

std::optional<KernelHandle> CacheCore::find_kernel(std::string_view key, int arch,
                                                   std::string_view kernel_name) noexcept {
    auto module = probe(key, arch, util::hash_key(key, arch));
    if (!module) return std::nullopt;
    // A broken module (a deferred JIT failure, or code gone for another context) goes the slow
    // way, which drops it and builds it again.
    if (module->entry_->broken()) return std::nullopt;
    const ResolvedKernel* kernel = module->entry_->find_kernel(kernel_name);
    if (kernel == nullptr) return std::nullopt;
    hits.add();
    thread_counters().hits++;
    return KernelHandle(std::move(*module), kernel);
}

Result<ModuleHandle> CacheCore::module_slow(std::string_view key,
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
                auto source = generate(key, make);
                if (!source) return std::move(source).error();
                auto now = util::source_fingerprint(*source, arch);
                if (now != module->entry_->fingerprint) {
                    verify_failures_.fetch_add(1, std::memory_order_relaxed);
                    std::string message =
                        "key '" + std::string(key) + "' (sm_" + std::to_string(arch) +
                        ") is cached for different source: cached "
                        "fingerprint " +
                        module->entry_->fingerprint.hex() + ", this source " + now.hex();
                    util::log_line(util::LogLevel::kInfo, message);
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
        // Lands the flight however this leader leaves (an exception included), so that waiters
        // never block on a flight nobody will finish.
        struct Landing {
            SingleFlight& flights;
            const std::string& id;
            std::shared_ptr<SingleFlight::Flight> flight;
            bool succeeded = false;
            Error error{Errc::kSourceFailed, "the compile was abandoned"};
            ~Landing() {
                flights.finish(id, flight,
                               succeeded ? std::nullopt : std::optional<Error>(std::move(error)));
            }
        } landing{flights_, id, ticket.flight};

        // The previous flight may have published between our probe and our join: look again
        // through the top of the loop, so that verification still applies.
        if (probe_exists(key, arch, hash)) {
            landing.succeeded = true;
            continue;
        }
        if (prepared != nullptr && prepared->has_value()) {
            PreparedArtifact ready = std::move(**prepared);
            prepared->reset();
            auto module = compile(key, arch, hash, ready.source, &ready);
            landing.succeeded = module.ok();
            if (!module) landing.error = module.error();
            return module;
        }
        auto source = generate(key, make);
        if (!source) {
            landing.error = source.error();
            return std::move(source).error();
        }
        auto module = compile(key, arch, hash, *source);
        landing.succeeded = module.ok();
        if (!module) landing.error = module.error();
        return module;
    }
}

Result<ModuleHandle> CacheCore::compile(std::string_view key, int arch, std::uint64_t hash,
                                        const Source& source, PreparedArtifact* prepared) {
    if (source.bytes.empty()) {
        compile_failures_.fetch_add(1, std::memory_order_relaxed);
        return Error(Errc::kInvalidArgument,
                     "key '" + std::string(key) + "': the source generator returned no bytes");
    }
    if (util::log_enabled(util::LogLevel::kInfo)) {  // no string building when silent
        util::log_line(util::LogLevel::kInfo, "miss " + describe_key(key, arch) + ": " +
                                                  source_kind_name(source.kind) + ", " +
                                                  std::to_string(source.bytes.size()) + " bytes");
    }
    // What prepare() made, and counted the time of, before the load takes it.
    const ArtifactPipeline::Origin made_by =
        prepared != nullptr ? prepared->produced.origin : ArtifactPipeline::Origin::kDriverJit;
    const std::uint64_t made_ns = prepared != nullptr ? prepared->produced.compile_ns : 0;
    auto built = prepared != nullptr ? pipeline_.load(key, source, std::move(prepared->produced))
                                     : pipeline_.build(key, arch, source);
    if (!built) {
        compile_failures_.fetch_add(1, std::memory_order_relaxed);
        Error error = std::move(built).error();
        util::log_line(util::LogLevel::kInfo,
                       "compile of " + describe_key(key, arch) + " failed: " + error.message());
        return Error(error.code(), "key '" + std::string(key) + "': " + error.message(),
                     error.log());
    }
    const bool compiled =
        built->origin == ArtifactPipeline::Origin::kDriverJit ||
        built->origin == ArtifactPipeline::Origin::kHostCompile ||
        (prepared != nullptr && made_by == ArtifactPipeline::Origin::kHostCompile);
    // One compile however it went (a host compile, the driver's JIT, or the JIT after the driver
    // refused the host's cubin), as kernel() counts it; prepare() counted a host compile's time.
    if (compiled) compiles_.fetch_add(1, std::memory_order_relaxed);
    compile_ns_.fetch_add(prepared == nullptr ? built->compile_ns : built->compile_ns - made_ns,
                          std::memory_order_relaxed);
    if (util::log_enabled(util::LogLevel::kInfo)) {
        char ms[32];
        std::snprintf(ms, sizeof ms, "%.2f ms", static_cast<double>(built->compile_ns) / 1e6);
        util::log_line(util::LogLevel::kInfo, "loaded " + describe_key(key, arch) + " from " +
                                                  origin_name(built->origin) +
                                                  (compiled ? std::string(" in ") + ms : ""));
    }
    auto library = built->library;

    compile::PtxParamSizes param_sizes;
    util::Fingerprint source_fingerprint{};
    if (prepared != nullptr) {
        param_sizes = std::move(prepared->param_sizes);
        source_fingerprint = prepared->source_fingerprint;
    } else {
        param_sizes = ptx_param_sizes_of(source, std::move(built->param_sizes));
        source_fingerprint = util::source_fingerprint(source, arch, built->source_bytes);
    }
    auto* entry = new Entry(std::string(key), arch, hash, source_fingerprint, library, driver_,
                            library_counters_, std::move(built->names), std::move(param_sizes));
    // Our reference is taken before the entry is published, so eviction cannot unload it under
    // the caller. It is the entry's home reference: hits by key allocate the striped counters.
    entry->add_ref(Entry::kHomeStripe);
    ModuleHandle module(entry, Entry::kHomeStripe);
    std::vector<Entry*> evicted;
    {
        std::lock_guard lock(write_mutex_);
        evicted = publish(entry);
    }
    // Unloading (a driver call) and freeing happen outside the writers' lock.
    for (Entry* victim : evicted) {
        util::log_line(util::LogLevel::kInfo, "evicted " + describe_key(victim->key, victim->arch));
        victim->retire();
    }
    return module;
}

Result<PreparedArtifact> CacheCore::prepare(std::string_view key,
                                            FunctionRef<Result<Source>()> make, int arch,
                                            bool for_load) {
    if (key.empty()) return Error(Errc::kInvalidArgument, "empty cache key");
    if (stats_flusher_) stats_flusher_->maybe_flush();
    auto source = generate(key, make);
    if (!source) return std::move(source).error();
    auto produced = pipeline_.produce(
        key, arch, *source,
        for_load ? ArtifactPipeline::Asking::kLookup : ArtifactPipeline::Asking::kPrebuild);
    if (!produced) {
        compile_failures_.fetch_add(1, std::memory_order_relaxed);
        Error error = std::move(produced).error();
        return Error(error.code(), "key '" + std::string(key) + "': " + error.message(),
                     error.log());
    }
    compile_ns_.fetch_add(produced->compile_ns, std::memory_order_relaxed);
    if (!for_load && produced->origin == ArtifactPipeline::Origin::kHostCompile) {
        compiles_.fetch_add(1, std::memory_order_relaxed);
        prebuild_compiles_.fetch_add(1, std::memory_order_relaxed);
    }
    PreparedArtifact prepared;
    prepared.source = std::move(source).value();
    prepared.produced = std::move(produced).value();
    if (for_load) {
        prepared.source_fingerprint =
            util::source_fingerprint(prepared.source, arch, prepared.produced.source_bytes);
        prepared.param_sizes = ptx_param_sizes_of(
            prepared.source,
            ArtifactPipeline::stored_param_sizes(prepared.source, prepared.produced.stored.get()));
    }
    return prepared;
}

Result<ArtifactOrigin> CacheCore::prebuild(std::string_view key, FunctionRef<Result<Source>()> make,
                                           int arch) {
    // Before the generator runs and any compiler sees the arch: a bad one changes nothing.
    if (auto checked = compile::check_target({arch, false}); !checked) {
        return Error(Errc::kInvalidArgument,
                     "key '" + std::string(key) + "': " + checked.error().message());
    }
    // A prebuild is for the disk: without the tier that was asked for, it would store nothing.
    if (disk_open_error_) {
        return Error(Errc::kIoError,
                     "key '" + std::string(key) +
                         "': not compiled, since nothing could be stored on disk: " +
                         disk_open_error_->message());
    }
    if (key.empty()) return Error(Errc::kInvalidArgument, "empty cache key");
    prebuilds_.fetch_add(1, std::memory_order_relaxed);
    auto prepared = prepare(key, make, arch, /*for_load=*/false);
    if (!prepared) return std::move(prepared).error();
    const ArtifactPipeline::Produced& produced = prepared->produced;
    if (produced.not_stored) {
        const bool compiled = produced.origin == ArtifactPipeline::Origin::kHostCompile;
        return Error(Errc::kIoError,
                     "key '" + std::string(key) +
                         "': " + (compiled ? "compiled" : "found in memory") + " for sm_" +
                         std::to_string(arch) +
                         " but not stored on disk: " + produced.not_stored->message());
    }
    switch (produced.origin) {
        case ArtifactPipeline::Origin::kHostCompile:
            return ArtifactOrigin::kCompiled;
        case ArtifactPipeline::Origin::kMemoryTier:
            return ArtifactOrigin::kMemoryTier;
        case ArtifactPipeline::Origin::kDiskTier:
            return ArtifactOrigin::kDiskTier;
        case ArtifactPipeline::Origin::kBinary:
            return ArtifactOrigin::kNotStored;
        case ArtifactPipeline::Origin::kDriverJit:
            break;
    }
    return Error(Errc::kUnsupported,
                 "key '" + std::string(key) +
                     "': PTX can only be compiled ahead of time with nvJitLink, which is not "
                     "available here (or host compilation is off)");
}

void CacheCore::discard(const ModuleHandle& module) {
    Entry* entry = module.entry_;
    {
        std::lock_guard lock(write_mutex_);
        const EntryTable* table = table_.load(std::memory_order_relaxed);
        std::vector<Entry*> kept;
        kept.reserve(table->size());
        for (Entry* e : table->entries()) {
            if (e != entry) kept.push_back(e);
        }
        if (kept.size() == table->size()) return;  // already gone (evicted, cleared)
        replace_table(new EntryTable(kept));
    }
    if (entry->broken_because() == Errc::kArtifactGone) {
        code_gone_.fetch_add(1, std::memory_order_relaxed);
        util::log_line(util::LogLevel::kInfo,
                       "discarded " + describe_key(entry->key, entry->arch) +
                           ": its bytes left the tiers before another context needed them; the "
                           "next lookup builds it again");
    } else {
        compile_failures_.fetch_add(1, std::memory_order_relaxed);
        util::log_line(util::LogLevel::kInfo,
                       "discarded " + describe_key(entry->key, entry->arch) + ": its JIT failed");
    }
    entry->retire();  // unloaded once the caller's handle goes
}

std::vector<Entry*> CacheCore::publish(Entry* entry) {
    entry->last_used.store(tick_.fetch_add(1, std::memory_order_relaxed) + 1,
                           std::memory_order_relaxed);
    EntryTable* table = table_.load(std::memory_order_relaxed);
    if (!table->try_insert(entry)) {  // full enough: a bigger table, with room to grow in place
        std::vector<Entry*> entries = table->entries();
        entries.push_back(entry);
        replace_table(new EntryTable(entries));
    }
    return evict_over_budget();
}

std::vector<Entry*> CacheCore::evict_over_budget() {
    const std::size_t budget = std::max<std::size_t>(1, options.max_entries);
    const EntryTable* table = table_.load(std::memory_order_relaxed);
    if (table->size() <= budget) return {};

    // Least recently used first, and among those, entries no handle holds: evicting a held one
    // frees nothing until its handles go. Other threads take and drop handles and mark recency
    // while we sort, so the sort works on a snapshot: a comparator reading live values would
    // be inconsistent, which std::sort punishes by running off the end of the range.
    struct Candidate {
        Entry* entry;
        bool held;
        std::uint64_t last_used;
    };
    std::vector<Candidate> order;
    order.reserve(table->size());
    for (Entry* entry : table->entries()) {
        order.push_back(
            {entry, entry->referenced(), entry->last_used.load(std::memory_order_relaxed)});
    }
    std::sort(order.begin(), order.end(), [](const Candidate& a, const Candidate& b) {
        if (a.held != b.held) return !a.held;
        return a.last_used < b.last_used;
    });
    const std::size_t excess = order.size() - budget;
    std::vector<Entry*> victims;
    std::vector<Entry*> kept;
    for (std::size_t i = 0; i < order.size(); ++i) {
        (i < excess ? victims : kept).push_back(order[i].entry);
    }
    replace_table(new EntryTable(kept));
    evictions_.fetch_add(victims.size(), std::memory_order_relaxed);
    return victims;
}

void CacheCore::replace_table(EntryTable* table) {
    const EntryTable* old = table_.exchange(table, std::memory_order_acq_rel);
    util::EpochDomain::global().retire([old] { delete old; });
}

void CacheCore::clear_locked() {
    std::vector<Entry*> victims;
    {
        std::lock_guard lock(write_mutex_);
        victims = table_.load(std::memory_order_relaxed)->entries();
        replace_table(new EntryTable({}));
    }
    for (Entry* victim : victims) victim->retire();
    thread_counters() = {};
    util::EpochDomain::global().collect();
}

std::size_t CacheCore::size() const {
    auto guard = util::EpochDomain::global().pin();
    return table_.load(std::memory_order_acquire)->size();
}

CacheStats CacheCore::stats() const {
    CacheStats s;
    s.hits = hits.sum();
    s.misses = misses_.load(std::memory_order_relaxed);
    s.compiles = compiles_.load(std::memory_order_relaxed);
    s.compile_failures = compile_failures_.load(std::memory_order_relaxed);
    s.code_gone = code_gone_.load(std::memory_order_relaxed);
    s.compile_ns = compile_ns_.load(std::memory_order_relaxed);
    s.waits = waits_.load(std::memory_order_relaxed);
    s.evictions = evictions_.load(std::memory_order_relaxed);
    s.verify_failures = verify_failures_.load(std::memory_order_relaxed);
    s.prebuilds = prebuilds_.load(std::memory_order_relaxed);
    s.prebuild_compiles = prebuild_compiles_.load(std::memory_order_relaxed);
    s.entries = size();
    // Unloads first: every unload counted was preceded by its load, so loaded >= unloaded.
    const auto unloaded = library_counters_->unloaded.load(std::memory_order_acquire);
    s.loaded_libraries = library_counters_->loaded.load(std::memory_order_acquire) - unloaded;
    if (const store::ArtifactStore* tiers = pipeline_.store()) {
        const store::ArtifactStats t = tiers->stats();
        s.memory_hits = t.memory_hits;
        s.read_backs = t.read_backs;
        s.disk_enabled = t.disk_enabled;
        s.disk_read_only = tiers->disk() != nullptr && tiers->disk()->read_only();
        s.disk_hits = t.disk.hits;
        s.disk_misses = t.disk.misses;
        s.disk_rejected = t.disk_rejected;
        s.disk_writes = t.disk.writes;
        s.disk_errors = t.disk.errors;
        s.disk_corrupt = t.disk.corrupt;
        s.disk_evicted = t.disk.evicted;
        s.disk_evicted_bytes = t.disk.evicted_bytes;
    }
    s.disk_errors += disk_open_errors_.load(std::memory_order_relaxed);
    s.config_errors = options.configuration_problems.size();
    return s;
}

}  // namespace kcache::cache
