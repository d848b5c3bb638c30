// SPDX-License-Identifier: Apache-2.0
// How a KernelCache is set up: its tiers, budgets, compile workers and checks (CacheOptions), from
// code or from the settings (CacheOptions::from_env).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kcache/result.hpp"

namespace kcache {

namespace driver {
class Driver;
}

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

}  // namespace kcache
