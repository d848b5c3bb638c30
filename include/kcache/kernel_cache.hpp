// SPDX-License-Identifier: Apache-2.0
// The in-process kernel cache: a caller's key -> a loaded kernel, compiled once per arch, handed
// out as handles that launch with no further lookup.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kcache/function_ref.hpp"
#include "kcache/launch.hpp"
#include "kcache/provenance.hpp"
#include "kcache/result.hpp"
#include "kcache/source.hpp"

namespace kcache {

namespace driver {
class Driver;
}
namespace cache {
class LoadedModule;
struct ResolvedKernel;
class LoadedModules;
struct PreparedArtifact;
}  // namespace cache

struct CacheOptions {
    // Loaded (key, arch) entries kept in the map; the least recently used go beyond it, down to
    // a sixteenth below it at once (so that each eviction's sort serves many loads). An evicted
    // entry's library stays loaded while a handle to it lives. 0 is taken as 1.
    std::size_t max_entries = 1024;
    // On every hit, run the source generator again and compare fingerprints: a key reused for
    // different source is then an error naming the key, never a silently wrong kernel. Launch
    // checks then also take parameter sizes from the driver, not from a PTX source's text.
    bool verify = false;
    // Null: the process's CUDA driver (libcuda.so.1, loaded at run time).
    std::shared_ptr<driver::Driver> driver;
    // Compile PTX to a cubin on the host (nvJitLink, in parallel across threads) instead of the
    // driver's JIT, so that the cubin can be kept in the tiers below. Off, or without nvJitLink,
    // PTX goes to the driver's JIT and is not stored.
    bool host_compile = true;
    // warm_up() links the PTX modules it is asked for into bundles of a few each, after it
    // returns, on threads of the cache's own, and stores them: a later warm-up of the same
    // modules loads each bundle as one module rather than one module per key
    // (KCACHE_BUNDLES; docs/user-guide.md). On: a module load costs the driver more the more
    // modules it holds, so thousands of one-key modules load ever slower (docs/performance.md).
    bool bundle_warm_ups = true;
    // Compiled artifacts kept in memory for this process (bytes).
    std::size_t memory_bytes = 256u << 20;
    // The disk tier's directory; empty: no disk tier. from_env() fills it (KCACHE_DIR, else
    // $XDG_CACHE_HOME/kcache, else $HOME/.cache/kcache) unless KCACHE_DISK=0. A directory that
    // cannot be used leaves the cache working from memory, with the reason logged and counted.
    std::string disk_directory;
    // Accept a group- or world-writable disk directory (KCACHE_ALLOW_SHARED_DIR=1).
    bool allow_shared_directory = false;
    // Read the disk directory, write nothing to it; accept one owned by root that others cannot
    // write (KCACHE_READ_ONLY=1): a cache baked into an image and read by a service user.
    bool read_only = false;
    // Compile CUDA C++ in this many worker processes (`kcache compile-worker`), so that a warm-up
    // compiles in parallel: NVRTC serializes compiles inside one process. A PTX link goes to a
    // worker that is started and idle, never starting one. 0: in this process.
    // KCACHE_COMPILE_WORKERS; the command is KCACHE_COMPILE_WORKER, else a `kcache` beside this
    // program. Without a usable command, compiles stay in this process (logged).
    std::size_t compile_workers = 0;
    std::string compile_worker_command;  // empty: as above
    // Budgets of the disk directory (shared by every process using it); 0: no limit. Beyond one,
    // the least recently used entries are removed, by one process at a time.
    std::uint64_t disk_max_bytes = std::uint64_t{4} << 30;  // KCACHE_MAX_SIZE ("4Gi", "500M")
    std::uint64_t disk_max_files = 0;                       // KCACHE_MAX_FILES
    // The remote tier (KCACHE_REMOTE): Redis backends asked after memory and disk, as
    // docs/remote.md describes; empty: none. Passwords from a backend's password-file or
    // KCACHE_REMOTE_PASSWORD. A setting that does not parse, or a key or password file that
    // cannot be read, leaves the remote tier off (warned once, counted in config_errors).
    std::string remote;
    // A remote lease lives this long unless its holder renews it (a crashed holder's expires);
    // a node waits at most remote_lease_wait for another's compile before compiling itself.
    std::chrono::milliseconds remote_lease_time{10000};
    std::chrono::milliseconds remote_lease_wait{120000};

    // Settings from_env_lenient() could not use, one line each; each is reported once and
    // counted in CacheStats::config_errors.
    std::vector<std::string> configuration_problems;

    // The most compile worker processes a cache starts (as `kcache compile -j`).
    static constexpr std::size_t kMaxCompileWorkers = 1024;
    // kInvalidArgument naming the field and its limit when one is out of range (compile_workers
    // above kMaxCompileWorkers); every other field means something at any value. from_env() and
    // the kcache command refuse such options; a KernelCache given them holds compile_workers to
    // the limit (logged), since a constructor has no error to return.
    Result<void> check() const;

    // Defaults, overridden by kcache.conf in the cache directory (once the directory is
    // accepted), then by the KCACHE_* environment (see the README's table); a bad value, or a
    // kcache.conf that cannot be read, is an error.
    static Result<CacheOptions> from_env();
    // The same, keeping every good setting when some are bad: those are listed in
    // configuration_problems, and a bad value of a setting that guards something (verify,
    // read_only) takes its safe value. What KernelCache::global() uses.
    static CacheOptions from_env_lenient();
};

// What a cache counted. Lookups (kernel(), module(), warm_up()) are hits or misses; a miss that
// reached the tiers ended as exactly one of memory_hits, disk_hits or disk_misses (with a disk
// tier). prebuild() is no lookup: it counts in prebuilds, and in compiles when it compiled.
// The counters kept across processes (for `kcache -s`) are listed once, by these field names, in
// KCACHE_STATS_COUNTERS (src/store/persistent_stats.hpp); a new one needs a field here too.
struct CacheStats {
    std::uint64_t hits = 0;
    std::uint64_t misses = 0;
    // Sources compiled successfully: for lookups (and loaded), and for prebuilds (of which
    // prebuild_compiles).
    std::uint64_t compiles = 0;
    std::uint64_t compile_failures = 0;  // never cached
    std::uint64_t compile_ns = 0;        // time spent compiling, failures included
    std::uint64_t waits = 0;             // lookups that waited for another thread's compile
    std::uint64_t evictions = 0;
    std::uint64_t verify_failures = 0;
    // Loaded entries dropped because their code could not reach a new context any more (its
    // bytes had left the tiers); each is built again at the next lookup of its key.
    std::uint64_t code_gone = 0;
    std::uint64_t entries = 0;           // entries in the map now
    std::uint64_t loaded_libraries = 0;  // loaded now, evicted-but-still-held ones included
    // The artifact tiers: lookups' misses served without compiling.
    std::uint64_t memory_hits = 0;
    std::uint64_t disk_hits = 0;
    // Entries read again (not lookups): the bytes of code loaded without keeping them, for a
    // context new to it.
    std::uint64_t read_backs = 0;
    std::uint64_t disk_misses = 0;  // lookups' misses neither tier served
    // Of disk_misses: an entry under the fingerprint held other key material (recompiled).
    std::uint64_t disk_rejected = 0;
    std::uint64_t disk_writes = 0;
    std::uint64_t disk_errors = 0;   // I/O failures, and a disk directory that could not be used
    std::uint64_t disk_corrupt = 0;  // entries that failed their checks, removed
    std::uint64_t disk_evicted = 0;  // entries removed to keep the disk budgets, by this cache
    std::uint64_t disk_evicted_bytes = 0;
    std::uint64_t prebuilds = 0;          // prebuild() calls that reached the tiers
    std::uint64_t prebuild_compiles = 0;  // of them, compiled (the rest were stored already)
    // Settings that could not be used (CacheOptions::configuration_problems).
    std::uint64_t config_errors = 0;
    bool disk_enabled = false;
    bool disk_read_only = false;  // the disk tier is read, never written
    // The remote tier (Redis): lookups it served or not after the disk tier missed, and what its
    // servers and uploads did; `remote.` in `kcache -s`.
    std::uint64_t remote_hits = 0;               // lookups a remote value served
    std::uint64_t remote_misses = 0;             // lookups no backend had a good value for
    std::uint64_t remote_errors = 0;             // requests that failed (timeouts apart)
    std::uint64_t remote_timeouts = 0;           // requests past a deadline
    std::uint64_t remote_skipped = 0;            // requests not sent: the server was set aside
    std::uint64_t remote_corrupt = 0;            // values that failed their checks (never loaded)
    std::uint64_t remote_signature_rejects = 0;  // unsigned, forged or replayed where signed needed
    std::uint64_t remote_too_large = 0;          // values over the size cap
    std::uint64_t remote_writes = 0;             // values stored
    std::uint64_t remote_writes_exists = 0;      // writes that lost the SET NX race (already there)
    std::uint64_t remote_write_errors = 0;       // writes refused (OOM, NOPERM)
    std::uint64_t remote_writes_dropped = 0;     // writes never sent (queue full, exit)
    std::uint64_t remote_breaker_openings = 0;   // times a server was set aside
    std::uint64_t remote_lease_won = 0;          // compiles led for the fleet
    std::uint64_t remote_lease_waited = 0;       // compiles another node led, waited for
    std::uint64_t remote_lease_wait_timeouts = 0;  // waits that ran out (compiled here after all)
    std::uint64_t remote_lease_takeovers = 0;      // leases taken after their holder's expired
    std::uint64_t remote_bytes_in = 0;
    std::uint64_t remote_bytes_out = 0;
    bool remote_enabled = false;
};

// The seed's per-thread counters: hits and misses of the calling thread only, across caches,
// since its last reset. Another thread's work never shows here.
struct ThreadStats {
    std::uint64_t hits = 0;
    std::uint64_t misses = 0;
};
ThreadStats thread_stats() noexcept;
void reset_thread_stats() noexcept;

class KernelHandle;

// How many tier hits warm_up() reads ahead of its loads (besides one a worker holds).
inline constexpr std::size_t kWarmUpReadAhead = 128;

// One kernel for warm_up(): what kernel() would be asked.
struct WarmUpItem {
    std::string key;
    std::function<Result<Source>()> make_source;
    std::string kernel_name;
};

// Reported after each item of a warm_up(), from the thread that finished it (calls are
// serialised). `error` is null on success.
struct WarmUpProgress {
    std::size_t done = 0;
    std::size_t total = 0;
    std::string_view key;
    const Error* error = nullptr;
};

// A reference to one loaded module (one cache entry). While any handle lives, its library stays
// loaded, through clear() and eviction alike. Copying is cheap and touches no shared cache line.
class ModuleHandle {
public:
    ModuleHandle() = default;
    ModuleHandle(const ModuleHandle& other) noexcept;
    // Inline: a hit moves its handle twice on the way out, and drops the moved-from ones.
    ModuleHandle(ModuleHandle&& other) noexcept
        : entry_(std::exchange(other.entry_, nullptr)), stripe_(other.stripe_) {}
    ModuleHandle& operator=(ModuleHandle other) noexcept;
    ~ModuleHandle() {
        if (entry_ != nullptr) release_entry();
    }

    explicit operator bool() const noexcept { return entry_ != nullptr; }
    const std::string& key() const noexcept;
    int arch() const noexcept;
    // The fingerprint (hex) of the artifact the module was loaded from, as `kcache ls` names it;
    // empty for code no tier holds (the driver's JIT of PTX, a caller's cubin or fatbin).
    std::string fingerprint() const;
    // The source digest (hex): the Source exactly as its generator gave it, and the arch. What
    // verification (CacheOptions::verify) compares on a hit.
    std::string source_digest() const;

    Result<KernelHandle> kernel(std::string_view name) const;
    // A __device__ or __constant__ variable of the module, as the calling thread's current
    // context holds it (each context has its own copy): its address and size, for the caller to
    // read or write (a table of constants, say) before launching. kInvalidArgument when the module
    // has no variable of that name.
    Result<DeviceGlobal> global(std::string_view name) const;

private:
    friend class KernelCache;
    friend class KernelHandle;
    friend class cache::LoadedModules;
    ModuleHandle(cache::LoadedModule* entry, std::uint32_t stripe) noexcept  // adopts a reference
        : entry_(entry), stripe_(stripe) {}
    void release_entry() noexcept;

    cache::LoadedModule* entry_ = nullptr;
    std::uint32_t stripe_ = 0;  // which of the entry's reference counters this handle counts on
};

// One kernel of a loaded module, ready to launch in the calling thread's current context (any
// context on a device of the module's arch). A launch without a current context fails with
// kNoContext. A launch in a context new to the code may fail with kArtifactGone: the code was
// loaded without keeping its bytes (a disk hit in a one-device process) and they have left the
// cache since; that handle stays unusable, and the next lookup of its key builds the kernel again.
class KernelHandle {
public:
    KernelHandle() = default;
    KernelHandle(const KernelHandle&) = default;
    KernelHandle& operator=(const KernelHandle&) = default;
    // A moved-from handle is empty: it no longer keeps the library loaded, so it must not
    // launch either.
    KernelHandle(KernelHandle&& other) noexcept
        : module_(std::move(other.module_)), kernel_(std::exchange(other.kernel_, nullptr)) {}
    KernelHandle& operator=(KernelHandle&& other) noexcept {
        module_ = std::move(other.module_);
        kernel_ = std::exchange(other.kernel_, nullptr);
        return *this;
    }
    ~KernelHandle() = default;

    explicit operator bool() const noexcept { return kernel_ != nullptr; }
    std::string_view name() const noexcept;
    // Parameter count as the driver reports it; -1 if the driver cannot tell.
    int param_count() const noexcept;
    const ModuleHandle& module() const noexcept { return module_; }

    // The kernel as CUDA names it, for the calls kcache does not make (cuFuncGetAttribute,
    // cuOccupancyMaxActiveBlocksPerMultiprocessor...): its CUfunction for the calling thread's
    // current context, and its CUkernel, which serves every context. Valid while a handle to the
    // module lives.
    Result<void*> native_function() const;
    Result<void*> native_kernel() const;
    // Sets an attribute, or the L1/shared memory preference, of the kernel (every handle to it
    // shares them) in every context it launches in, those it reaches later included: dynamic
    // shared memory above 48 KiB, a required cluster shape... A value the device refuses is
    // kInvalidArgument, and is not kept.
    Result<void> set_attribute(KernelAttribute attribute, int value) const;
    Result<void> set_cache_config(CacheConfig config) const;

    // Checks the argument count against the kernel's parameters, then launches.
    Result<void> launch(const LaunchConfig& config, std::span<void* const> args) const;

    // Also checks each argument's size (bytes, sizes[i] for args[i]) against the parameter's: for
    // callers that know the sizes only at run time (the C API). kInvalidArgument when the two
    // spans differ in length.
    Result<void> launch(const LaunchConfig& config, std::span<void* const> args,
                        std::span<const std::size_t> sizes) const;

    // Typed launch: also checks each argument's size against the parameter's size.
    template <class... Args>
    Result<void> launch_with(const LaunchConfig& config, const Args&... args) const {
        // The driver only reads the argument values; its C signature is just not const.
        void* pointers[] = {const_cast<void*>(static_cast<const void*>(&args))..., nullptr};
        const std::size_t sizes[] = {sizeof(Args)..., 0};
        return launch_sized(config, pointers, sizes, sizeof...(Args));
    }

private:
    friend class ModuleHandle;
    friend class cache::LoadedModules;
    KernelHandle(ModuleHandle module, const cache::ResolvedKernel* kernel) noexcept
        : module_(std::move(module)), kernel_(kernel) {}
    // launch() when the parameter count is not known yet or does not match.
    Result<void> launch_checked(const LaunchConfig& config, std::span<void* const> args) const;
    Result<void> launch_sized(const LaunchConfig& config, void** args, const std::size_t* sizes,
                              std::size_t count) const;
    // A driver call's result, seen by the entry: code that cannot reach this context any more
    // breaks it.
    template <class T>
    Result<T> checked(Result<T> result) const {
        if (!result) noticed(result.error());
        return result;
    }
    void noticed(const Error& error) const;

    ModuleHandle module_;
    const cache::ResolvedKernel* kernel_ = nullptr;  // owned by the entry module_ keeps alive
};

class KernelCache;

// Holds off every clear() of one cache (the seed's kernel_cache_exclusive): a compile-then-hit
// sequence run under it cannot be split by a clear from another thread.
class ExclusiveGuard {
public:
    void clear();  // empties the cache without giving up exclusivity

private:
    friend class KernelCache;
    ExclusiveGuard(KernelCache& cache, std::unique_lock<std::mutex> lock)
        : cache_(&cache), lock_(std::move(lock)) {}
    KernelCache* cache_;
    std::unique_lock<std::mutex> lock_;
};

class KernelCache {
public:
    explicit KernelCache(CacheOptions options = {});
    ~KernelCache();
    KernelCache(const KernelCache&) = delete;
    KernelCache& operator=(const KernelCache&) = delete;

    // The process-wide cache, configured from the environment; never destroyed.
    static KernelCache& global();

    // Looks up `key` for the current context's arch. On a miss (only), calls make_source() —
    // returning Source or Result<Source> — and compiles it once however many threads ask.
    // A failed compile is returned to every waiting thread and is not cached.
    // When every device of the process has the same arch, a hit does not ask the driver which
    // context is current (it succeeds even with none; a launch then fails with kNoContext). A
    // miss always needs a current context. A module found broken (see KernelHandle) is dropped
    // and built again here.
    template <class MakeSource>
    Result<KernelHandle> kernel(std::string_view key, MakeSource&& make_source,
                                std::string_view kernel_name) {
        auto generate = [&]() -> Result<Source> { return make_source(); };
        return kernel_impl(key, generate, kernel_name);
    }

    template <class MakeSource>
    Result<ModuleHandle> module(std::string_view key, MakeSource&& make_source) {
        auto generate = [&]() -> Result<Source> { return make_source(); };
        return module_impl(key, generate);
    }

    // Look up or compile, then launch in the current context.
    template <class MakeSource>
    Result<void> launch(std::string_view key, MakeSource&& make_source,
                        std::string_view kernel_name, const LaunchConfig& config,
                        std::span<void* const> args) {
        auto handle = kernel(key, make_source, kernel_name);
        if (!handle) return std::move(handle).error();
        auto launched = handle->launch(config, args);
        if (launched || launched.error().code() != Errc::kArtifactGone) return launched;
        // The launch broke the module; the lookup builds it again, once.
        handle = kernel(key, make_source, kernel_name);
        if (!handle) return std::move(handle).error();
        return handle->launch(config, args);
    }

    // Compiles `key`'s source for `arch` (e.g. 90) into the artifact tiers without loading it, so
    // that a later process finds it on disk: no GPU is needed. PTX needs nvJitLink for this
    // (kUnsupported otherwise). Nothing is added to the in-process map of loaded kernels.
    // kInvalidArgument for an arch no compiler of kcache's takes (sm_75 to sm_999), before the
    // generator runs. With a disk tier configured, kIoError when the artifact is not on disk
    // after all (the directory was refused, or the write failed): a prebuild's whole point.
    // Says where the artifact came from: kCompiled, kMemoryTier, kDiskTier, or kBinary for a
    // cubin or fatbin (nothing to compile or keep).
    template <class MakeSource>
    Result<Provenance> prebuild(std::string_view key, MakeSource&& make_source, int arch) {
        auto generate = [&]() -> Result<Source> { return make_source(); };
        return prebuild_impl(key, generate, arch);
    }

    // Makes a list of kernels' artifacts on `threads` worker threads (tier reads and host
    // compiles run in parallel) and loads each on the calling thread, which needs a current
    // context, as soon as it is ready. Each artifact is read or compiled once. Results come in the
    // items' order; a failed item does not stop the others. Tier hits are read at most
    // kWarmUpReadAhead (and one a worker) ahead of the loads, so that a warm-up of thousands of
    // kernels holds a few entries' bytes at a time, not all of them.
    std::vector<Result<KernelHandle>> warm_up(
        const std::vector<WarmUpItem>& items, unsigned threads,
        const std::function<void(const WarmUpProgress&)>& progress = {});

    // The seed's calls: PTX given up front.
    Result<ModuleHandle> get_or_compile(std::string_view key, std::string_view ptx);
    Result<void> compile_lock_launch(std::string_view key, std::string_view ptx,
                                     std::string_view kernel_name, const LaunchConfig& config,
                                     std::span<void* const> args);

    // Empties the map and resets the calling thread's stats (as the seed did). Live handles keep
    // working; their libraries are unloaded when the last one goes. Waits for exclusive holders.
    void clear();
    [[nodiscard]] ExclusiveGuard exclusive();

    CacheStats stats() const;
    std::size_t size() const;
    const CacheOptions& options() const noexcept;

    // Waits until the kernels compiled so far were written to the disk tier (a lookup's compile
    // is written behind its caller, who has the kernel first), the remote uploads queued so far
    // were sent or failed (each request has its own deadline), and the remote hits were written
    // to the disk tier. A program that must know its compiles reached the fleet (`kcache
    // compile`) calls it before exiting; others need not: a cache's end writes what is queued
    // for the disk, and gives its queued uploads a short grace period, then drops and counts the
    // rest.
    void wait_for_uploads();

private:
    friend class ExclusiveGuard;
    using SourceFn = FunctionRef<Result<Source>()>;
    // With `prepared` (warm_up's), a miss loads that artifact rather than making its own.
    Result<KernelHandle> kernel_impl(std::string_view key, SourceFn make_source,
                                     std::string_view kernel_name,
                                     std::optional<cache::PreparedArtifact>* prepared = nullptr);
    Result<ModuleHandle> module_impl(std::string_view key, SourceFn make_source);
    Result<Provenance> prebuild_impl(std::string_view key, SourceFn make_source, int arch);

    std::unique_ptr<cache::LoadedModules> modules_;
};

}  // namespace kcache
