// SPDX-License-Identifier: Apache-2.0
//! The seed's kernel cache calls under the seed's names (aprender-gpu's `cache.rs`), backed by
//! kcache's process-wide cache ([`Cache::global`](crate::Cache::global)) and its per-thread
//! counters, so that the seed's crate can swap its `cache.rs` for these.
//!
//! Where they differ from the seed, and why:
//! - `get_or_compile_kernel` returns a [`Module`] rather than `Arc<Mutex<CudaModule>>`: a
//!   kcache module is already a counted reference, and its kernels launch from several threads
//!   at once, so there is no lock to take.
//! - The context argument is any `&C`: kcache looks up and launches in the calling thread's
//!   current context, which the seed's `CudaContext::new` (and `make_current`) set. The stream
//!   is anything [`AsRawStream`] (one line for the seed's `CudaStream`: `self.raw()`).
//! - `compile_lock_launch` is an `unsafe fn`: its arguments are raw pointers that a public safe
//!   function could not vouch for (the seed's was crate-private, safe, with a "Safety" note).
//!   kcache checks their count against the kernel's parameters before launching.
//! - Errors are [`Error`](crate::Error) (status and full message, with the compiler's log),
//!   which the seed maps into its `GpuError` once.
//! - A miss prints nothing (the seed printed "[KERNEL-CACHE] Compiling: key" to stderr).
//! - The counters count this thread's lookups in every kcache cache, not only the global one.
use std::os::raw::c_void;
use std::ptr;

use crate::error::{check, Result};
use crate::kernel::{c_string, Module};
use crate::{sys, Cache};

/// A launch's shape, as the seed's driver has it: grid and block dimensions and the dynamic
/// shared memory per block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Grid dimensions (blocks).
    pub grid: (u32, u32, u32),
    /// Block dimensions (threads).
    pub block: (u32, u32, u32),
    /// Dynamic shared memory per block, in bytes.
    pub shared_mem: u32,
}

impl LaunchConfig {
    /// One dimension: enough blocks of `block_size` threads for `num_elements`.
    pub fn linear(num_elements: u32, block_size: u32) -> LaunchConfig {
        LaunchConfig {
            grid: ((num_elements + block_size - 1) / block_size, 1, 1),
            block: (block_size, 1, 1),
            shared_mem: 0,
        }
    }
}

/// A stream to launch on: the seed's `CudaStream` implements it with its `raw()`.
pub trait AsRawStream {
    /// The `CUstream` (null: the context's default stream).
    fn as_raw_stream(&self) -> sys::CUstream;
}

impl AsRawStream for sys::CUstream {
    fn as_raw_stream(&self) -> sys::CUstream {
        *self
    }
}

fn global() -> Result<Cache> {
    Cache::global()
}

/// Gets a cached kernel module, compiling `ptx` only if `key` is not present for the current
/// context's arch. Another thread asking for the same key meanwhile waits for this compile.
pub fn get_or_compile_kernel<C: ?Sized>(_ctx: &C, key: &str, ptx: &str) -> Result<Module> {
    let cache = global()?;
    let key = c_string(key, "the key")?;
    let ptx = c_string(ptx, "the PTX")?;
    let mut out = ptr::null_mut();
    // SAFETY: the strings outlive the call; `out` is an out parameter.
    check(unsafe {
        sys::kcache_cache_get_or_compile(cache.as_raw(), key.as_ptr(), ptx.as_ptr(), &mut out)
    })?;
    // SAFETY: on success kcache handed out a reference for us to release.
    Ok(unsafe { Module::from_raw(out) })
}

/// Looks up (or compiles) `cache_key`, then launches its kernel `kernel_name` on `stream` with
/// `config` and `args`, one pointer to each argument's value as `cuLaunchKernel` takes them.
///
/// # Safety
/// `args` holds valid pointers to values whose types match the kernel's parameters, and every
/// device pointer among them is valid for the kernel's accesses (kcache checks their count).
pub unsafe fn compile_lock_launch<C: ?Sized, S: AsRawStream + ?Sized>(
    _ctx: &C,
    stream: &S,
    cache_key: &str,
    ptx: &str,
    kernel_name: &str,
    config: &LaunchConfig,
    args: &mut [*mut c_void],
) -> Result<()> {
    let cache = global()?;
    let key = c_string(cache_key, "the key")?;
    let ptx = c_string(ptx, "the PTX")?;
    let name = c_string(kernel_name, "the kernel name")?;
    let grid = [config.grid.0, config.grid.1, config.grid.2];
    let block = [config.block.0, config.block.1, config.block.2];
    check(sys::kcache_cache_compile_lock_launch(
        cache.as_raw(),
        key.as_ptr(),
        ptx.as_ptr(),
        name.as_ptr(),
        grid.as_ptr(),
        block.as_ptr(),
        config.shared_mem,
        stream.as_raw_stream(),
        args.as_mut_ptr(),
        args.len(),
    ))
}

/// Kernel cache hits of the current thread since its last reset.
#[must_use]
pub fn kernel_cache_hits() -> u64 {
    crate::thread_stats().hits
}

/// Kernel cache misses of the current thread since its last reset.
#[must_use]
pub fn kernel_cache_misses() -> u64 {
    crate::thread_stats().misses
}

/// Resets the current thread's kernel cache statistics.
pub fn reset_kernel_cache_stats() {
    crate::reset_thread_stats();
}

/// Empties the shared module map and resets this thread's counters. Waits while another thread
/// holds [`kernel_cache_exclusive`], so it cannot land inside another caller's compile/hit
/// observation. Loaded code that a handle still uses stays loaded.
pub fn clear_kernel_cache() {
    // The seed's clear cannot fail; kcache's fails only without memory, which is said here
    // rather than dropped.
    if let Err(error) = global().and_then(|cache| cache.clear()) {
        eprintln!("kcache: clear_kernel_cache: {}", error);
    }
}

/// Exclusive access to the shared kernel cache: while it lives no `clear_kernel_cache()`
/// anywhere in the process takes effect. Dropping it releases it; it stays on its thread.
#[derive(Debug)]
pub struct KernelCacheExclusive {
    // A raw pointer: not Send, as kcache wants the guard released on the thread that took it.
    raw: *mut sys::kcache_exclusive,
}

impl KernelCacheExclusive {
    /// Empties the cache while holding exclusivity (and resets this thread's counters).
    pub fn clear(&self) {
        // SAFETY: the guard is live. As for clear_kernel_cache, a failure is said, not dropped.
        if let Err(error) = check(unsafe { sys::kcache_exclusive_clear(self.raw) }) {
            eprintln!("kcache: KernelCacheExclusive::clear: {}", error);
        }
    }
}

impl Drop for KernelCacheExclusive {
    fn drop(&mut self) {
        // SAFETY: ours, released once, on the thread that took it.
        unsafe { sys::kcache_exclusive_release(self.raw) }
    }
}

/// Acquires exclusive access to the shared kernel cache, blocking until no other holder and no
/// clear in flight remains. See [`KernelCacheExclusive`].
///
/// # Panics
/// When kcache cannot make the guard (out of memory): the seed's call cannot fail, and a guard
/// that guarded nothing would break the caller's atomicity silently.
#[must_use]
pub fn kernel_cache_exclusive() -> KernelCacheExclusive {
    let mut raw = ptr::null_mut();
    let taken = global()
        // SAFETY: the global cache is never destroyed; `raw` is an out parameter.
        .and_then(|cache| check(unsafe { sys::kcache_cache_exclusive(cache.as_raw(), &mut raw) }));
    match taken {
        Ok(()) => KernelCacheExclusive { raw },
        Err(error) => panic!("kcache: kernel_cache_exclusive: {}", error),
    }
}
