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

#include "kcache/cache_options.hpp"
#include "kcache/cache_stats.hpp"
#include "kcache/function_ref.hpp"
#include "kcache/launch.hpp"
#include "kcache/provenance.hpp"
#include "kcache/result.hpp"
#include "kcache/source.hpp"

namespace kcache {

namespace cache {
class LoadedModule;
struct ResolvedKernel;
class LoadedModules;
struct PreparedArtifact;
}  // namespace cache

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
