// SPDX-License-Identifier: Apache-2.0
//! kcache for Rust: compiles a GPU kernel once (in this thread, this process, this machine and,
//! with a remote tier, a cluster), over kcache's C API (`include/kcache/kcache.h`).
//!
//! ```no_run
//! use kcache::{Cache, DevicePtr, Source};
//!
//! fn scale(x: DevicePtr<f32>, factor: f32, n: u32) -> kcache::Result<()> {
//!     let cache = Cache::global()?; // the process-wide cache, configured by KCACHE_*
//!     // The generator runs only on a miss; keep the kernel to launch with no lookup at all.
//!     let kernel = cache.kernel("scale:f32", || Ok(Source::ptx(make_scale_ptx())), "scale")?;
//!     // The count and each size are checked against the kernel's parameters first.
//!     unsafe { kernel.launch((n + 255) / 256, 256, 0, std::ptr::null_mut(), &[&x, &factor, &n]) }
//! }
//! # fn make_scale_ptx() -> String { String::new() }
//! ```
//!
//! [`seed`] has the seed's calls under the seed's names. [`sys`] is the raw C API. The crate
//! finds libkcache through `KCACHE_LIB_DIR` or pkg-config (docs/rust.md).
mod cache;
mod error;
mod kernel;
mod launch;
pub mod seed;
mod source;
pub mod sys;

pub use cache::{Cache, Exclusive, Options, Provenance, Stats, WarmUp, WarmUpItem};
pub use error::{Error, Result, Status};
pub use kernel::{DevicePtr, Dim3, Kernel, KernelArg, Module};
pub use launch::{CacheConfig, DeviceGlobal, KernelAttribute, LaunchConfig};
pub use source::{Made, Source};
pub use sys::CUstream;

/// The library's version as built ("0.1.0"); this crate's is [`CRATE_VERSION`].
pub fn version() -> &'static str {
    // SAFETY: a static string.
    unsafe { error::static_str(sys::kcache_version()) }
}

/// The version of kcache this crate was written for, which [`version`] should match.
pub const CRATE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The calling thread's hits and misses, across caches, since its last reset (or clear).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ThreadStats {
    pub hits: u64,
    pub misses: u64,
}

/// The calling thread's counters: another thread's work never shows in them.
pub fn thread_stats() -> ThreadStats {
    let mut stats = ThreadStats::default();
    // SAFETY: two out parameters.
    unsafe { sys::kcache_thread_stats(&mut stats.hits, &mut stats.misses) };
    stats
}

/// Resets the calling thread's counters.
pub fn reset_thread_stats() {
    // SAFETY: no arguments.
    unsafe { sys::kcache_reset_thread_stats() }
}
