// SPDX-License-Identifier: Apache-2.0
//! The raw C API of `include/kcache/kcache.h`, declaration for declaration and in its order: the
//! one place that says what the C side looks like. The header documents every call; the safe
//! wrapper is the rest of this crate.
#![allow(non_camel_case_types)]

use std::os::raw::{c_char, c_int, c_uint, c_void};

/// A `CUstream` (NULL: the context's default stream).
pub type CUstream = *mut c_void;

// ---- Errors ----------------------------------------------------------------------------------

/// `enum kcache_status`: C gives an enum without negative values the type `unsigned int`.
pub type kcache_status = c_uint;
pub const KCACHE_OK: kcache_status = 0;
pub const KCACHE_NO_DRIVER: kcache_status = 1;
pub const KCACHE_NO_CONTEXT: kcache_status = 2;
pub const KCACHE_COMPILE_FAILED: kcache_status = 3;
pub const KCACHE_SOURCE_FAILED: kcache_status = 4;
pub const KCACHE_KEY_CONFLICT: kcache_status = 5;
pub const KCACHE_ARGUMENT_MISMATCH: kcache_status = 6;
pub const KCACHE_KERNEL_NOT_FOUND: kcache_status = 7;
pub const KCACHE_INVALID_ARGUMENT: kcache_status = 8;
pub const KCACHE_DRIVER_ERROR: kcache_status = 9;
pub const KCACHE_UNSUPPORTED: kcache_status = 10;
pub const KCACHE_CORRUPT_ENTRY: kcache_status = 11;
pub const KCACHE_IO_ERROR: kcache_status = 12;
pub const KCACHE_ARTIFACT_GONE: kcache_status = 13;
pub const KCACHE_OUT_OF_MEMORY: kcache_status = 14;
pub const KCACHE_INTERNAL_ERROR: kcache_status = 15;

// ---- Sources ---------------------------------------------------------------------------------

/// `kcache_source_builder`: opaque, owned by kcache, valid during a generator's call only.
#[repr(C)]
pub struct kcache_source_builder {
    _private: [u8; 0],
}

/// `KCACHE_NUL_TERMINATED`: for a length parameter, the bytes up to the first NUL.
pub const KCACHE_NUL_TERMINATED: usize = usize::MAX;

/// `kcache_make_source`. The C type is a non-NULL function pointer here: pass `None` for NULL.
pub type kcache_make_source = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        source: *mut kcache_source_builder,
    ) -> kcache_status,
>;

// ---- Caches ----------------------------------------------------------------------------------

#[repr(C)]
pub struct kcache_cache {
    _private: [u8; 0],
}

/// `kcache_options`: fill with `kcache_options_init`, which sets `struct_size`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct kcache_options {
    pub struct_size: usize,
    pub max_entries: usize,
    pub verify: c_int,
    pub host_compile: c_int,
    pub memory_bytes: u64,
    pub disk_directory: *const c_char,
    pub read_only: c_int,
    pub remote: *const c_char,
    pub compile_workers: usize,
    pub disk_max_bytes: u64,
    pub disk_max_files: u64,
    pub bundle_warm_ups: c_int,
}

// ---- Modules and kernels ---------------------------------------------------------------------

#[repr(C)]
pub struct kcache_module {
    _private: [u8; 0],
}

#[repr(C)]
pub struct kcache_kernel {
    _private: [u8; 0],
}

// ---- Launching with everything a generator's kernels use ------------------------------------

/// `kcache_launch_config`: `kcache_launch_config_init` fills it (grid and block `{1, 1, 1}`, the
/// rest zero); kcache reads only its first `struct_size` bytes.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct kcache_launch_config {
    pub struct_size: usize,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_bytes: u32,
    pub stream: CUstream,
    pub cluster: [u32; 3],
    pub cooperative: c_int,
    pub programmatic_dependent_launch: c_int,
}

/// `enum kcache_kernel_attribute`.
pub type kcache_kernel_attribute = c_uint;
pub const KCACHE_ATTRIBUTE_MAX_DYNAMIC_SHARED_BYTES: kcache_kernel_attribute = 0;
pub const KCACHE_ATTRIBUTE_PREFERRED_SHARED_CARVEOUT: kcache_kernel_attribute = 1;
pub const KCACHE_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH: kcache_kernel_attribute = 2;
pub const KCACHE_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT: kcache_kernel_attribute = 3;
pub const KCACHE_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH: kcache_kernel_attribute = 4;
pub const KCACHE_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED: kcache_kernel_attribute = 5;
pub const KCACHE_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE: kcache_kernel_attribute = 6;

/// `enum kcache_cache_config`.
pub type kcache_cache_config = c_uint;
pub const KCACHE_PREFER_NONE: kcache_cache_config = 0;
pub const KCACHE_PREFER_SHARED: kcache_cache_config = 1;
pub const KCACHE_PREFER_L1: kcache_cache_config = 2;
pub const KCACHE_PREFER_EQUAL: kcache_cache_config = 3;

// ---- Building ahead --------------------------------------------------------------------------

/// `enum kcache_provenance`.
pub type kcache_provenance = c_uint;
pub const KCACHE_PROVENANCE_COMPILED: kcache_provenance = 0;
pub const KCACHE_PROVENANCE_DRIVER_JIT: kcache_provenance = 1;
pub const KCACHE_PROVENANCE_MEMORY_TIER: kcache_provenance = 2;
pub const KCACHE_PROVENANCE_DISK_TIER: kcache_provenance = 3;
pub const KCACHE_PROVENANCE_BINARY: kcache_provenance = 4;
pub const KCACHE_PROVENANCE_REMOTE_TIER: kcache_provenance = 5;

/// `kcache_warm_up_item`: the first four fields given, the last two set by the call.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct kcache_warm_up_item {
    pub key: *const c_char,
    pub make: kcache_make_source,
    pub user_data: *mut c_void,
    pub kernel_name: *const c_char,
    pub kernel: *mut kcache_kernel,
    pub status: kcache_status,
}

// ---- Clearing and the exclusive guard --------------------------------------------------------

#[repr(C)]
pub struct kcache_exclusive {
    _private: [u8; 0],
}

// ---- Statistics ------------------------------------------------------------------------------

/// `kcache_stats`: set `struct_size` to its size before `kcache_cache_stats`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct kcache_stats {
    pub struct_size: usize,
    pub hits: u64,
    pub misses: u64,
    pub compiles: u64,
    pub compile_failures: u64,
    pub compile_ns: u64,
    pub waits: u64,
    pub evictions: u64,
    pub verify_failures: u64,
    pub code_gone: u64,
    pub entries: u64,
    pub loaded_libraries: u64,
    pub memory_hits: u64,
    pub disk_hits: u64,
    pub read_backs: u64,
    pub disk_misses: u64,
    pub disk_rejected: u64,
    pub disk_writes: u64,
    pub disk_errors: u64,
    pub disk_corrupt: u64,
    pub disk_evicted: u64,
    pub disk_evicted_bytes: u64,
    pub prebuilds: u64,
    pub prebuild_compiles: u64,
    pub config_errors: u64,
    pub remote_hits: u64,
    pub remote_misses: u64,
    pub remote_errors: u64,
    pub remote_timeouts: u64,
    pub remote_skipped: u64,
    pub remote_corrupt: u64,
    pub remote_signature_rejects: u64,
    pub remote_too_large: u64,
    pub remote_writes: u64,
    pub remote_writes_exists: u64,
    pub remote_write_errors: u64,
    pub remote_writes_dropped: u64,
    pub remote_breaker_openings: u64,
    pub remote_lease_won: u64,
    pub remote_lease_waited: u64,
    pub remote_lease_wait_timeouts: u64,
    pub remote_lease_takeovers: u64,
    pub remote_bytes_in: u64,
    pub remote_bytes_out: u64,
    pub disk_enabled: c_int,
    pub disk_read_only: c_int,
    pub remote_enabled: c_int,
}

extern "C" {
    // Version
    pub fn kcache_version() -> *const c_char;

    // Errors
    pub fn kcache_status_name(status: kcache_status) -> *const c_char;
    pub fn kcache_last_error_status() -> kcache_status;
    pub fn kcache_last_error_message() -> *const c_char;
    pub fn kcache_last_error_log() -> *const c_char;

    // Sources
    pub fn kcache_source_set_ptx(
        source: *mut kcache_source_builder,
        text: *const c_char,
        length: usize,
    ) -> kcache_status;
    pub fn kcache_source_set_cuda(
        source: *mut kcache_source_builder,
        code: *const c_char,
        length: usize,
    ) -> kcache_status;
    pub fn kcache_source_set_cubin(
        source: *mut kcache_source_builder,
        data: *const c_void,
        size: usize,
    ) -> kcache_status;
    pub fn kcache_source_set_fatbin(
        source: *mut kcache_source_builder,
        data: *const c_void,
        size: usize,
    ) -> kcache_status;
    pub fn kcache_source_add_option(
        source: *mut kcache_source_builder,
        option: *const c_char,
    ) -> kcache_status;
    pub fn kcache_source_add_name_expression(
        source: *mut kcache_source_builder,
        expression: *const c_char,
    ) -> kcache_status;
    pub fn kcache_source_add_header(
        source: *mut kcache_source_builder,
        name: *const c_char,
        contents: *const c_char,
        length: usize,
    ) -> kcache_status;
    pub fn kcache_source_set_arch_specific(
        source: *mut kcache_source_builder,
        on: c_int,
    ) -> kcache_status;
    pub fn kcache_source_set_allow_disk_headers(
        source: *mut kcache_source_builder,
        on: c_int,
    ) -> kcache_status;
    pub fn kcache_source_set_error(
        source: *mut kcache_source_builder,
        message: *const c_char,
    ) -> kcache_status;

    // Caches
    pub fn kcache_options_init(options: *mut kcache_options);
    pub fn kcache_cache_create(
        options: *const kcache_options,
        out: *mut *mut kcache_cache,
    ) -> kcache_status;
    pub fn kcache_cache_create_from_env(out: *mut *mut kcache_cache) -> kcache_status;
    pub fn kcache_cache_global(out: *mut *mut kcache_cache) -> kcache_status;
    pub fn kcache_cache_destroy(cache: *mut kcache_cache);

    // Modules and kernels
    pub fn kcache_cache_get_kernel(
        cache: *mut kcache_cache,
        key: *const c_char,
        make: kcache_make_source,
        user_data: *mut c_void,
        kernel_name: *const c_char,
        out: *mut *mut kcache_kernel,
    ) -> kcache_status;
    pub fn kcache_cache_get_module(
        cache: *mut kcache_cache,
        key: *const c_char,
        make: kcache_make_source,
        user_data: *mut c_void,
        out: *mut *mut kcache_module,
    ) -> kcache_status;
    pub fn kcache_cache_get_or_compile(
        cache: *mut kcache_cache,
        key: *const c_char,
        ptx: *const c_char,
        out: *mut *mut kcache_module,
    ) -> kcache_status;
    pub fn kcache_cache_compile_lock_launch(
        cache: *mut kcache_cache,
        key: *const c_char,
        ptx: *const c_char,
        kernel_name: *const c_char,
        grid: *const u32,
        block: *const u32,
        shared_bytes: u32,
        stream: CUstream,
        args: *mut *mut c_void,
        arg_count: usize,
    ) -> kcache_status;
    pub fn kcache_module_get_kernel(
        module: *const kcache_module,
        kernel_name: *const c_char,
        out: *mut *mut kcache_kernel,
    ) -> kcache_status;
    pub fn kcache_module_key(module: *const kcache_module) -> *const c_char;
    pub fn kcache_module_arch(module: *const kcache_module) -> c_int;
    pub fn kcache_module_fingerprint(module: *const kcache_module) -> *const c_char;
    pub fn kcache_module_release(module: *mut kcache_module);
    pub fn kcache_kernel_name(kernel: *const kcache_kernel) -> *const c_char;
    pub fn kcache_kernel_param_count(kernel: *const kcache_kernel) -> c_int;
    pub fn kcache_kernel_clone(
        kernel: *const kcache_kernel,
        out: *mut *mut kcache_kernel,
    ) -> kcache_status;
    pub fn kcache_kernel_release(kernel: *mut kcache_kernel);

    // Launching
    pub fn kcache_launch(
        kernel: *const kcache_kernel,
        grid: *const u32,
        block: *const u32,
        shared_bytes: u32,
        stream: CUstream,
        args: *mut *mut c_void,
        arg_count: usize,
    ) -> kcache_status;
    pub fn kcache_launch_sized(
        kernel: *const kcache_kernel,
        grid: *const u32,
        block: *const u32,
        shared_bytes: u32,
        stream: CUstream,
        args: *mut *mut c_void,
        sizes: *const usize,
        arg_count: usize,
    ) -> kcache_status;

    // Launching with everything a generator's kernels use
    pub fn kcache_launch_config_init(config: *mut kcache_launch_config);
    pub fn kcache_launch_ex(
        kernel: *const kcache_kernel,
        config: *const kcache_launch_config,
        args: *mut *mut c_void,
        sizes: *const usize,
        arg_count: usize,
    ) -> kcache_status;
    pub fn kcache_kernel_set_attribute(
        kernel: *const kcache_kernel,
        attribute: kcache_kernel_attribute,
        value: c_int,
    ) -> kcache_status;
    pub fn kcache_kernel_set_cache_config(
        kernel: *const kcache_kernel,
        config: kcache_cache_config,
    ) -> kcache_status;
    pub fn kcache_kernel_native_function(
        kernel: *const kcache_kernel,
        function: *mut *mut c_void,
    ) -> kcache_status;
    pub fn kcache_kernel_native_kernel(
        kernel: *const kcache_kernel,
        cu_kernel: *mut *mut c_void,
    ) -> kcache_status;
    pub fn kcache_module_global(
        module: *const kcache_module,
        name: *const c_char,
        address: *mut u64,
        size: *mut usize,
    ) -> kcache_status;

    // Building ahead
    pub fn kcache_provenance_name(provenance: kcache_provenance) -> *const c_char;
    pub fn kcache_cache_prebuild(
        cache: *mut kcache_cache,
        key: *const c_char,
        make: kcache_make_source,
        user_data: *mut c_void,
        arch: c_int,
        provenance: *mut kcache_provenance,
    ) -> kcache_status;
    pub fn kcache_cache_warm_up(
        cache: *mut kcache_cache,
        items: *mut kcache_warm_up_item,
        count: usize,
        item_size: usize,
        threads: c_uint,
    ) -> kcache_status;

    // Clearing and the exclusive guard
    pub fn kcache_cache_clear(cache: *mut kcache_cache) -> kcache_status;
    pub fn kcache_cache_size(cache: *const kcache_cache) -> usize;
    pub fn kcache_cache_exclusive(
        cache: *mut kcache_cache,
        out: *mut *mut kcache_exclusive,
    ) -> kcache_status;
    pub fn kcache_exclusive_clear(guard: *mut kcache_exclusive) -> kcache_status;
    pub fn kcache_exclusive_release(guard: *mut kcache_exclusive);

    // Statistics
    pub fn kcache_cache_stats(cache: *const kcache_cache, out: *mut kcache_stats) -> kcache_status;
    pub fn kcache_thread_stats(hits: *mut u64, misses: *mut u64);
    pub fn kcache_reset_thread_stats();
}
