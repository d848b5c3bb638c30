// SPDX-License-Identifier: Apache-2.0
/* kcache's C API: the kernel cache of kcache/kernel_cache.hpp for C and for any language with a C
 * foreign function interface (Rust, Python's ctypes or cffi, Go, Julia).
 *
 * C99; no C++ in this header and no CUDA header needed. Link libkcache (`pkg-config --libs
 * kcache`, or the CMake package's kcache::kcache); the library is C++, so a program linking the
 * static libkcache.a also links the C++ runtime (-lstdc++).
 *
 * Conventions, for every function below:
 * - Errors. A function that can fail returns a kcache_status: KCACHE_OK, or the reason. When it
 *   fails it also records, for the calling thread, the full message of the error
 *   (kcache_last_error_message(): the status's name, the message and, for a compile, the
 *   compiler's log) and the status (kcache_last_error_status()). A call that succeeds leaves the
 *   record as it was. The record is per thread, so threads never see each other's errors.
 * - No C++ exception leaves a kcache function; running out of memory is KCACHE_OUT_OF_MEMORY.
 * - Strings given to kcache (keys, kernel names, options) are NUL-terminated UTF-8 unless a
 *   length is taken; kcache copies what it keeps, so they only need to live for the call.
 *   Strings kcache returns are owned by the object they come from and live as long as it does.
 * - Handles (kcache_cache, kcache_module, kcache_kernel, kcache_exclusive) are opaque. Each one
 *   a function hands out is released by the function named for it; NULL may be released.
 *   Out parameters are set to NULL when a call fails.
 * - Thread safety: a kcache_cache may be used by any number of threads at once. A kcache_module
 *   or kcache_kernel may be used (launched, queried) by several threads at once; releasing one
 *   must not race with another use of the same handle. A kcache_exclusive is released on the
 *   thread that took it.
 */
#ifndef KCACHE_KCACHE_H
#define KCACHE_KCACHE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Version ---------------------------------------------------------------------------- */

/* The library's version as built ("0.1.0"), for a program to compare with the KCACHE_VERSION of
 * kcache/version.hpp it was compiled against. A static string. */
const char* kcache_version(void);

/* ---- Errors ----------------------------------------------------------------------------- */

/* What went wrong. One code per kcache::Errc (kcache/result.hpp), in its order, then two that
 * only the C API needs. The values are fixed: new codes are only ever added at the end. */
typedef enum kcache_status {
    KCACHE_OK = 0,
    KCACHE_NO_DRIVER = 1,         /* libcuda.so.1 could not be loaded or initialised */
    KCACHE_NO_CONTEXT = 2,        /* the calling thread has no current CUDA context */
    KCACHE_COMPILE_FAILED = 3,    /* the compiler or JIT rejected the source (log in message) */
    KCACHE_SOURCE_FAILED = 4,     /* the caller's source generator failed */
    KCACHE_KEY_CONFLICT = 5,      /* verification: a key was reused for different source */
    KCACHE_ARGUMENT_MISMATCH = 6, /* launch arguments do not match the kernel's parameters */
    KCACHE_KERNEL_NOT_FOUND = 7,  /* the module has no kernel of that name */
    KCACHE_INVALID_ARGUMENT = 8,  /* bad input from the caller (NULL, empty key, zero grid) */
    KCACHE_DRIVER_ERROR = 9,      /* any other error reported by the CUDA driver */
    KCACHE_UNSUPPORTED = 10,      /* a capability is missing (old driver, no nvJitLink) */
    KCACHE_CORRUPT_ENTRY = 11,    /* a stored entry failed its checks */
    KCACHE_IO_ERROR = 12,         /* a file or directory operation failed */
    KCACHE_ARTIFACT_GONE = 13,    /* code loaded without its bytes, which another context
                                     needed after they left the cache; look the key up again */
    KCACHE_OUT_OF_MEMORY = 14,    /* an allocation failed */
    KCACHE_INTERNAL_ERROR = 15    /* an unexpected failure inside kcache (a bug: report it) */
} kcache_status;

/* The status's name as kcache's messages spell it ("compile-failed"); "unknown" for a value that
 * is none of the above. A static string. */
const char* kcache_status_name(kcache_status status);

/* The calling thread's last error: the status of its last failed kcache call (KCACHE_OK if none
 * failed yet), and that error's full message: "<status name>: <message>", followed for a compile
 * failure by the compiler's log on the next lines. Never NULL ("" when no call failed). The
 * string belongs to the thread and stays valid until its next failing kcache call, or its end. */
kcache_status kcache_last_error_status(void);
const char* kcache_last_error_message(void);
/* Only the compiler's or JIT's own log of the last error ("" when it had none); lives as the
 * message does. */
const char* kcache_last_error_log(void);

/* ---- Sources ---------------------------------------------------------------------------- */

/* What a source generator fills in on a miss (kcache::Source). Owned by kcache and valid only
 * during the generator's call: keep no pointer to it. Every setter copies its arguments. A
 * setter that fails (KCACHE_INVALID_ARGUMENT, KCACHE_OUT_OF_MEMORY) fails the lookup too, even
 * if the generator then returns KCACHE_OK. */
typedef struct kcache_source_builder kcache_source_builder;

/* For a length parameter: the bytes up to the first NUL (strlen). */
#define KCACHE_NUL_TERMINATED ((size_t)-1)

/* Which source this is; a later call replaces the bytes and kind of an earlier one. PTX text must
 * contain no NUL byte. A cubin is an ELF for one exact arch; a fatbin may hold several archs and
 * PTX. CUDA C++ is compiled by NVRTC (the options, headers and name expressions below apply to
 * it only). */
kcache_status kcache_source_set_ptx(kcache_source_builder* source, const char* text, size_t length);
kcache_status kcache_source_set_cuda(kcache_source_builder* source, const char* code,
                                     size_t length);
kcache_status kcache_source_set_cubin(kcache_source_builder* source, const void* data, size_t size);
kcache_status kcache_source_set_fatbin(kcache_source_builder* source, const void* data,
                                       size_t size);
/* CUDA C++: one NVRTC option other than the arch ("-DN=4", "-std=c++17"), in order. */
kcache_status kcache_source_add_option(kcache_source_builder* source, const char* option);
/* CUDA C++: a template instantiation to compile ("softmax<float, 32>"), which a lookup then names
 * as its kernel. extern "C" kernels need none. */
kcache_status kcache_source_add_name_expression(kcache_source_builder* source,
                                                const char* expression);
/* CUDA C++: a header passed as a string for #include "name". */
kcache_status kcache_source_add_header(kcache_source_builder* source, const char* name,
                                       const char* contents, size_t length);
/* CUDA C++: compile for sm_XXa (wgmma, setmaxnreg). */
kcache_status kcache_source_set_arch_specific(kcache_source_builder* source, int on);
/* CUDA C++: let NVRTC read headers from disk (they are then not fingerprinted). */
kcache_status kcache_source_set_allow_disk_headers(kcache_source_builder* source, int on);
/* The generator's own reason for failing, put into the lookup's message when it returns an
 * error status. */
kcache_status kcache_source_set_error(kcache_source_builder* source, const char* message);

/* A source generator: called only on a miss (and, with verify, on a hit), at most once per call
 * that needs it, to fill `source`. KCACHE_OK with a source set: kcache compiles it. Any other
 * status fails the lookup with KCACHE_SOURCE_FAILED, whose message carries what
 * kcache_source_set_error said (or the status's name); failures are never cached.
 * It may be called on a thread other than the caller's (kcache_cache_warm_up's workers), and by
 * several threads at once when they miss different keys with one generator and user_data. */
typedef kcache_status (*kcache_make_source)(void* user_data, kcache_source_builder* source);

/* ---- Caches ----------------------------------------------------------------------------- */

typedef struct kcache_cache kcache_cache;

/* Settings for kcache_cache_create (the fields of kcache::CacheOptions a C program sets most).
 * Fill it with kcache_options_init, which sets struct_size, then change fields: a later version
 * of kcache adds fields at the end only and reads just the first struct_size bytes, so a program
 * built against this header keeps working. */
typedef struct kcache_options {
    size_t struct_size;    /* sizeof(kcache_options), as set by kcache_options_init */
    size_t max_entries;    /* loaded (key, arch) entries kept; least recently used go beyond */
    int verify;            /* non-zero: run the generator on every hit and compare fingerprints */
    int host_compile;      /* non-zero: compile PTX with nvJitLink and keep the cubin (default) */
    uint64_t memory_bytes; /* bytes of compiled artifacts kept in memory for this process */
    const char* disk_directory; /* the disk tier's directory; NULL or "": no disk tier (default) */
    int read_only;              /* non-zero: read the disk directory, write nothing to it */
    const char* remote;         /* the remote tier (KCACHE_REMOTE's syntax); NULL or "": none */
    size_t compile_workers;     /* CUDA C++ compile worker processes; 0: compile in this process */
    uint64_t disk_max_bytes;    /* the disk directory's budget in bytes; 0: no limit */
    uint64_t disk_max_files;    /* the disk directory's budget in files; 0: no limit */
    int bundle_warm_ups;        /* non-zero: warm-ups link their PTX modules into bundles, and load
                                 * the bundles a tier has, each as one module (default 1) */
} kcache_options;

/* kcache::CacheOptions's defaults, with struct_size set. Not the environment's settings: for
 * those, kcache_cache_create_from_env. */
void kcache_options_init(kcache_options* options);

/* A new cache with `options` (copied; its strings need not outlive the call).
 * KCACHE_INVALID_ARGUMENT for a NULL argument, a struct_size too small to hold struct_size, or
 * compile_workers beyond kcache's limit. A disk directory that cannot be used is no error: the
 * cache works from memory and says why once (logged, and counted in disk_errors). */
kcache_status kcache_cache_create(const kcache_options* options, kcache_cache** out);

/* A new cache configured as the kcache command and kcache::KernelCache::global() are: defaults,
 * then kcache.conf in the cache directory, then the KCACHE_* environment (README's table). A
 * setting that does not parse is KCACHE_INVALID_ARGUMENT naming it. */
kcache_status kcache_cache_create_from_env(kcache_cache** out);

/* The process-wide cache (KernelCache::global(): from the environment, lenient about bad
 * settings, never destroyed). The handle is borrowed: the same pointer every time, and
 * kcache_cache_destroy ignores it. */
kcache_status kcache_cache_global(kcache_cache** out);

/* Destroys a cache made by kcache_cache_create*: no other thread may be using it. Modules and
 * kernels handed out by it stay usable (their code stays loaded until they are released). */
void kcache_cache_destroy(kcache_cache* cache);

/* ---- Modules and kernels ---------------------------------------------------------------- */

/* A counted reference to one loaded module, and one to one of its kernels. While any lives, its
 * code stays loaded through clear and eviction. */
typedef struct kcache_module kcache_module;
typedef struct kcache_kernel kcache_kernel;

/* Looks `key` up for the current context's arch and hands out the kernel `kernel_name` of it. On
 * a miss only, calls make(user_data, source) and compiles that source once however many threads
 * ask; a failed compile is returned to every waiting thread and is not cached. A miss needs a
 * current CUDA context on the calling thread (KCACHE_NO_CONTEXT, or KCACHE_NO_DRIVER without a
 * usable driver). Release *out with kcache_kernel_release. */
kcache_status kcache_cache_get_kernel(kcache_cache* cache, const char* key, kcache_make_source make,
                                      void* user_data, const char* kernel_name,
                                      kcache_kernel** out);

/* The same for the whole module. Release *out with kcache_module_release. */
kcache_status kcache_cache_get_module(kcache_cache* cache, const char* key, kcache_make_source make,
                                      void* user_data, kcache_module** out);

/* The seed's calls, PTX given up front: get_or_compile (a module) and compile_lock_launch (look
 * up or compile, then launch as kcache_launch does). */
kcache_status kcache_cache_get_or_compile(kcache_cache* cache, const char* key, const char* ptx,
                                          kcache_module** out);
kcache_status kcache_cache_compile_lock_launch(kcache_cache* cache, const char* key,
                                               const char* ptx, const char* kernel_name,
                                               const uint32_t grid[3], const uint32_t block[3],
                                               uint32_t shared_bytes, void* stream, void** args,
                                               size_t arg_count);

/* A kernel of a module, by name (as kcache_cache_get_kernel names it). */
kcache_status kcache_module_get_kernel(const kcache_module* module, const char* kernel_name,
                                       kcache_kernel** out);
/* The key the module was looked up by; its arch (e.g. 90); the fingerprint (hex) of the artifact
 * it was loaded from, as `kcache ls` names it ("" for code no tier holds). */
const char* kcache_module_key(const kcache_module* module);
int kcache_module_arch(const kcache_module* module);
const char* kcache_module_fingerprint(const kcache_module* module);
void kcache_module_release(kcache_module* module);

/* The kernel's name; its parameter count as the driver reports it (-1 if it cannot tell, or for
 * NULL). */
const char* kcache_kernel_name(const kcache_kernel* kernel);
int kcache_kernel_param_count(const kcache_kernel* kernel);
/* Another reference to the same kernel, released on its own. */
kcache_status kcache_kernel_clone(const kcache_kernel* kernel, kcache_kernel** out);
void kcache_kernel_release(kcache_kernel* kernel);

/* ---- Launching -------------------------------------------------------------------------- */

/* Launches `kernel` in the calling thread's current context on `stream` (a CUstream; NULL: the
 * context's default stream) with grid and block dimensions {x, y, z}, `shared_bytes` of dynamic
 * shared memory and `args`: arg_count pointers, each to one argument's value, as cuLaunchKernel
 * takes them (the driver copies the values; kcache writes nothing through them). The argument
 * count is checked against the kernel's parameters first (KCACHE_ARGUMENT_MISMATCH). No lookup:
 * a kernel handle launches directly. Without a current context: KCACHE_NO_CONTEXT. */
kcache_status kcache_launch(const kcache_kernel* kernel, const uint32_t grid[3],
                            const uint32_t block[3], uint32_t shared_bytes, void* stream,
                            void** args, size_t arg_count);

/* The same, also checking each argument's size in bytes (sizes[i] for args[i]) against the
 * parameter's: a float passed where a pointer is expected is KCACHE_ARGUMENT_MISMATCH naming the
 * parameter, not a crash in the kernel. */
kcache_status kcache_launch_sized(const kcache_kernel* kernel, const uint32_t grid[3],
                                  const uint32_t block[3], uint32_t shared_bytes, void* stream,
                                  void** args, const size_t* sizes, size_t arg_count);

/* ---- Launching with everything a generator's kernels use -------------------------------- */

/* A launch with cuLaunchKernelEx's options. Fill it with kcache_launch_config_init (which sets
 * struct_size, grid and block to {1, 1, 1} and the rest to zero), then change fields: a later
 * version adds fields at the end only and reads just the first struct_size bytes. */
typedef struct kcache_launch_config {
    size_t struct_size;
    uint32_t grid[3];
    uint32_t block[3];
    uint32_t shared_bytes; /* dynamic shared memory; above 48 KiB see
                              KCACHE_ATTRIBUTE_MAX_DYNAMIC_SHARED_BYTES */
    void* stream;          /* a CUstream; NULL: the context's default stream */
    uint32_t cluster[3];   /* blocks per thread block cluster (sm_90); all 0: none */
    int cooperative;       /* non-zero: every block resident at once (a grid-wide sync) */
    int programmatic_dependent_launch; /* non-zero: may start before the stream's previous
                                          kernel ends (griddepcontrol.wait) */
} kcache_launch_config;

void kcache_launch_config_init(kcache_launch_config* config);

/* Launches as kcache_launch does, with the config's options. `sizes` (arg_count of them, each
 * argument's size in bytes) is checked as kcache_launch_sized checks it; NULL checks the count
 * only. KCACHE_INVALID_ARGUMENT for a NULL config or a struct_size too small for the fields up to
 * the stream. */
kcache_status kcache_launch_ex(const kcache_kernel* kernel, const kcache_launch_config* config,
                               void** args, const size_t* sizes, size_t arg_count);

/* Settings of a kernel its launches depend on (kcache::KernelAttribute). Fixed values. */
typedef enum kcache_kernel_attribute {
    KCACHE_ATTRIBUTE_MAX_DYNAMIC_SHARED_BYTES = 0,
    KCACHE_ATTRIBUTE_PREFERRED_SHARED_CARVEOUT = 1,
    KCACHE_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH = 2,
    KCACHE_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT = 3,
    KCACHE_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH = 4,
    KCACHE_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 5,
    KCACHE_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE = 6
} kcache_kernel_attribute;

/* The kernel's preference between L1 and shared memory (cuFuncSetCacheConfig). */
typedef enum kcache_cache_config {
    KCACHE_PREFER_NONE = 0,
    KCACHE_PREFER_SHARED = 1,
    KCACHE_PREFER_L1 = 2,
    KCACHE_PREFER_EQUAL = 3
} kcache_cache_config;

/* Sets an attribute or the cache preference of the kernel (shared by every handle to it) in every
 * context it launches in, later ones included. A value the device refuses is
 * KCACHE_INVALID_ARGUMENT and is not kept; an unknown enumerator too. */
kcache_status kcache_kernel_set_attribute(const kcache_kernel* kernel,
                                          kcache_kernel_attribute attribute, int value);
kcache_status kcache_kernel_set_cache_config(const kcache_kernel* kernel,
                                             kcache_cache_config config);

/* The kernel as CUDA names it, for calls kcache does not make: its CUfunction for the calling
 * thread's current context, and its CUkernel (every context). Valid while a handle to its module
 * lives. */
kcache_status kcache_kernel_native_function(const kcache_kernel* kernel, void** function);
kcache_status kcache_kernel_native_kernel(const kcache_kernel* kernel, void** cu_kernel);

/* A __device__ or __constant__ variable of the module in the calling thread's current context
 * (each context has its own copy): its device address (a CUdeviceptr) and size in bytes, for the
 * caller to write or read. KCACHE_INVALID_ARGUMENT when the module has none of that name. */
kcache_status kcache_module_global(const kcache_module* module, const char* name, uint64_t* address,
                                   size_t* size);

/* ---- Building ahead --------------------------------------------------------------------- */

/* How a module's code was had (kcache::Provenance). Fixed values; new ones added at the end. */
typedef enum kcache_provenance {
    KCACHE_PROVENANCE_COMPILED = 0,    /* compiled on the host now and put to every tier */
    KCACHE_PROVENANCE_DRIVER_JIT = 1,  /* PTX handed to the driver's JIT: nothing stored */
    KCACHE_PROVENANCE_MEMORY_TIER = 2, /* found in this process's memory tier */
    KCACHE_PROVENANCE_DISK_TIER = 3,   /* found in the disk tier */
    KCACHE_PROVENANCE_BINARY = 4,      /* the caller's cubin or fatbin: nothing to compile */
    KCACHE_PROVENANCE_REMOTE_TIER = 5  /* found in the remote tier, written to the disk tier */
} kcache_provenance;

/* "compiled", "disk tier", ...; "unknown" for another value. A static string. */
const char* kcache_provenance_name(kcache_provenance provenance);

/* Compiles `key`'s source for `arch` (e.g. 90) into the artifact tiers without loading it, so
 * that a later process finds it on disk: no GPU needed. PTX needs nvJitLink for it
 * (KCACHE_UNSUPPORTED otherwise). KCACHE_INVALID_ARGUMENT for an arch no compiler takes, before
 * the generator runs; KCACHE_IO_ERROR when a disk tier is configured but the artifact did not
 * reach it. `provenance` may be NULL. */
kcache_status kcache_cache_prebuild(kcache_cache* cache, const char* key, kcache_make_source make,
                                    void* user_data, int arch, kcache_provenance* provenance);

/* One kernel for kcache_cache_warm_up: what kcache_cache_get_kernel would be asked (the first four
 * fields, given), and what it answered (the last two, set by the call). */
typedef struct kcache_warm_up_item {
    const char* key;
    kcache_make_source make;
    void* user_data;
    const char* kernel_name;
    kcache_kernel* kernel; /* out: the handle (release it), or NULL when the item failed */
    kcache_status status;  /* out: the item's own status */
} kcache_warm_up_item;

/* Makes the items' artifacts on up to `threads` worker threads (tier reads and host compiles in
 * parallel; generators run there) and loads each on the calling thread, which needs a current
 * context, as soon as it is ready. Each item gets its own status and kernel; a failed item does
 * not stop the others. `item_size` is sizeof(kcache_warm_up_item), so that the item may grow.
 * Returns KCACHE_OK when every item succeeded; otherwise the first failed item's status, and
 * the last error's message lists every failed item's key and full error. Whatever it returns,
 * release every item's kernel that is not NULL. */
kcache_status kcache_cache_warm_up(kcache_cache* cache, kcache_warm_up_item* items, size_t count,
                                   size_t item_size, unsigned threads);

/* ---- Clearing and the exclusive guard --------------------------------------------------- */

/* Empties the cache's map and resets the calling thread's counters (as the seed did). Live
 * handles keep working. Waits while another thread holds the exclusive guard; on a thread that
 * holds it, use kcache_exclusive_clear instead (this call would wait for itself). */
kcache_status kcache_cache_clear(kcache_cache* cache);
/* Loaded (key, arch) entries in the map now. 0 for NULL. */
size_t kcache_cache_size(const kcache_cache* cache);

/* Holds off every clear of one cache (the seed's kernel_cache_exclusive): a compile-then-hit
 * sequence run under it cannot be split by another thread's clear. Waits for another holder.
 * Release it, on the same thread, with kcache_exclusive_release. */
typedef struct kcache_exclusive kcache_exclusive;
kcache_status kcache_cache_exclusive(kcache_cache* cache, kcache_exclusive** out);
/* Empties the cache without giving up exclusivity. */
kcache_status kcache_exclusive_clear(kcache_exclusive* guard);
void kcache_exclusive_release(kcache_exclusive* guard);

/* ---- Statistics ------------------------------------------------------------------------- */

/* What a cache counted (kcache::CacheStats, whose comments say what each field means). Set
 * struct_size to sizeof(kcache_stats) before the call: kcache fills only the fields that fit in
 * it, so that the struct can grow at its end. Booleans are 0 or 1. */
typedef struct kcache_stats {
    size_t struct_size;
    uint64_t hits;
    uint64_t misses;
    uint64_t compiles;
    uint64_t compile_failures;
    uint64_t compile_ns;
    uint64_t waits;
    uint64_t evictions;
    uint64_t verify_failures;
    uint64_t code_gone;
    uint64_t entries;
    uint64_t loaded_libraries;
    uint64_t memory_hits;
    uint64_t disk_hits;
    uint64_t read_backs;
    uint64_t disk_misses;
    uint64_t disk_rejected;
    uint64_t disk_writes;
    uint64_t disk_errors;
    uint64_t disk_corrupt;
    uint64_t disk_evicted;
    uint64_t disk_evicted_bytes;
    uint64_t prebuilds;
    uint64_t prebuild_compiles;
    uint64_t config_errors;
    uint64_t remote_hits;
    uint64_t remote_misses;
    uint64_t remote_errors;
    uint64_t remote_timeouts;
    uint64_t remote_skipped;
    uint64_t remote_corrupt;
    uint64_t remote_signature_rejects;
    uint64_t remote_too_large;
    uint64_t remote_writes;
    uint64_t remote_writes_exists;
    uint64_t remote_write_errors;
    uint64_t remote_writes_dropped;
    uint64_t remote_breaker_openings;
    uint64_t remote_lease_won;
    uint64_t remote_lease_waited;
    uint64_t remote_lease_wait_timeouts;
    uint64_t remote_lease_takeovers;
    uint64_t remote_bytes_in;
    uint64_t remote_bytes_out;
    int disk_enabled;
    int disk_read_only;
    int remote_enabled;
} kcache_stats;

/* KCACHE_INVALID_ARGUMENT for NULL or a struct_size smaller than the struct_size field. */
kcache_status kcache_cache_stats(const kcache_cache* cache, kcache_stats* out);

/* The seed's per-thread counters: hits and misses of the calling thread only, across caches,
 * since its last reset (or clear). Another thread's work never shows in them. */
void kcache_thread_stats(uint64_t* hits, uint64_t* misses);
void kcache_reset_thread_stats(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KCACHE_KCACHE_H */
