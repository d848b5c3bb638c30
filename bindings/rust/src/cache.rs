// SPDX-License-Identifier: Apache-2.0
//! Caches: creation, lookups, prebuild, warm-up, clear, the exclusive guard and statistics.
use std::ffi::CString;
use std::marker::PhantomData;
use std::mem;
use std::os::raw::{c_int, c_uint};
use std::path::PathBuf;
use std::ptr;

use crate::error::{check, static_str, Error, Result, Status};
use crate::kernel::{c_string, Kernel, Module};
use crate::source::{generator, Made};
use crate::sys;

/// Settings for [`Cache::new`] (the fields of `kcache_options`); `Default` is kcache's defaults,
/// not the environment's settings ([`Cache::from_env`] reads those).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Loaded (key, arch) entries kept; the least recently used go beyond.
    pub max_entries: usize,
    /// Run the generator on every hit and compare fingerprints.
    pub verify: bool,
    /// Compile PTX with nvJitLink and keep the cubin.
    pub host_compile: bool,
    /// Bytes of compiled artifacts kept in memory for this process.
    pub memory_bytes: u64,
    /// The disk tier's directory; `None`: no disk tier.
    pub disk_directory: Option<PathBuf>,
    /// Read the disk directory, write nothing to it.
    pub read_only: bool,
    /// The remote tier (KCACHE_REMOTE's syntax); `None`: none.
    pub remote: Option<String>,
    /// CUDA C++ compile worker processes; 0: compile in this process.
    pub compile_workers: usize,
    /// The disk directory's budget in bytes; 0: no limit.
    pub disk_max_bytes: u64,
    /// The disk directory's budget in files; 0: no limit.
    pub disk_max_files: u64,
    /// Warm-ups link their PTX modules into bundles, and load the bundles a tier has, each as one
    /// module.
    pub bundle_warm_ups: bool,
}

impl Default for Options {
    fn default() -> Options {
        // SAFETY: kcache_options_init fills the whole struct.
        let c = unsafe {
            let mut c = mem::MaybeUninit::<sys::kcache_options>::zeroed();
            sys::kcache_options_init(c.as_mut_ptr());
            c.assume_init()
        };
        Options {
            max_entries: c.max_entries,
            verify: c.verify != 0,
            host_compile: c.host_compile != 0,
            memory_bytes: c.memory_bytes,
            disk_directory: None,
            read_only: c.read_only != 0,
            remote: None,
            compile_workers: c.compile_workers,
            disk_max_bytes: c.disk_max_bytes,
            disk_max_files: c.disk_max_files,
            bundle_warm_ups: c.bundle_warm_ups != 0,
        }
    }
}

/// How a module's code was had.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Provenance {
    /// Compiled on the host now and put to every tier.
    Compiled,
    /// PTX handed to the driver's JIT: nothing stored.
    DriverJit,
    /// Found in this process's memory tier.
    MemoryTier,
    /// Found in the disk tier.
    DiskTier,
    /// The caller's cubin or fatbin: nothing to compile.
    Binary,
    /// Found in the remote tier, written to the disk tier.
    RemoteTier,
    /// A value this crate does not know (a newer library).
    Other(u32),
}

impl Provenance {
    fn from_raw(raw: sys::kcache_provenance) -> Provenance {
        match raw {
            sys::KCACHE_PROVENANCE_COMPILED => Provenance::Compiled,
            sys::KCACHE_PROVENANCE_DRIVER_JIT => Provenance::DriverJit,
            sys::KCACHE_PROVENANCE_MEMORY_TIER => Provenance::MemoryTier,
            sys::KCACHE_PROVENANCE_DISK_TIER => Provenance::DiskTier,
            sys::KCACHE_PROVENANCE_BINARY => Provenance::Binary,
            sys::KCACHE_PROVENANCE_REMOTE_TIER => Provenance::RemoteTier,
            other => Provenance::Other(other),
        }
    }

    fn raw(self) -> sys::kcache_provenance {
        match self {
            Provenance::Compiled => sys::KCACHE_PROVENANCE_COMPILED,
            Provenance::DriverJit => sys::KCACHE_PROVENANCE_DRIVER_JIT,
            Provenance::MemoryTier => sys::KCACHE_PROVENANCE_MEMORY_TIER,
            Provenance::DiskTier => sys::KCACHE_PROVENANCE_DISK_TIER,
            Provenance::Binary => sys::KCACHE_PROVENANCE_BINARY,
            Provenance::RemoteTier => sys::KCACHE_PROVENANCE_REMOTE_TIER,
            Provenance::Other(other) => other,
        }
    }

    /// "compiled", "disk tier", ...
    pub fn name(self) -> &'static str {
        // SAFETY: a static string for any value.
        unsafe { static_str(sys::kcache_provenance_name(self.raw())) }
    }
}

/// What a cache counted (`kcache::CacheStats`, whose comments say what each field means).
pub type Stats = sys::kcache_stats;

/// One kernel to warm up: what [`Cache::kernel`] would be asked. Its generator may run on one
/// of warm-up's worker threads, hence `Send`.
pub struct WarmUpItem<'a> {
    key: CString,
    kernel_name: CString,
    make: Option<Box<dyn FnOnce() -> Made + Send + 'a>>,
}

impl<'a> WarmUpItem<'a> {
    /// An item; a key or name with a NUL byte is an `InvalidArgument`.
    pub fn new<F>(key: &str, kernel_name: &str, make: F) -> Result<WarmUpItem<'a>>
    where
        F: FnOnce() -> Made + Send + 'a,
    {
        Ok(WarmUpItem {
            key: c_string(key, "the key")?,
            kernel_name: c_string(kernel_name, "the kernel name")?,
            make: Some(Box::new(make)),
        })
    }
}

/// What [`Cache::warm_up`] answered: each item's kernel or error, in the items' order, and the
/// call's own error, whose message lists every failed item's key and full error (each item's
/// error has its status and key only).
#[derive(Debug)]
pub struct WarmUp {
    pub kernels: Vec<Result<Kernel>>,
    pub error: Option<Error>,
}

/// A kernel cache. Any number of threads may use one at once. A cache made by [`Cache::new`] or
/// [`Cache::from_env`] is destroyed when dropped; its modules and kernels stay usable.
#[derive(Debug)]
pub struct Cache {
    raw: *mut sys::kcache_cache,
}

// kcache_cache is safe to use from any number of threads; destroying takes `self` by value.
unsafe impl Send for Cache {}
unsafe impl Sync for Cache {}

impl Drop for Cache {
    fn drop(&mut self) {
        // SAFETY: the cache is ours and unused by now (Drop has it alone); kcache ignores the
        // borrowed global one.
        unsafe { sys::kcache_cache_destroy(self.raw) }
    }
}

impl Cache {
    fn made(status: sys::kcache_status, raw: *mut sys::kcache_cache) -> Result<Cache> {
        check(status)?;
        Ok(Cache { raw })
    }

    /// A new cache with `options`.
    pub fn new(options: &Options) -> Result<Cache> {
        let directory = match &options.disk_directory {
            Some(path) => Some(c_string(
                path.to_str().ok_or_else(|| {
                    Error::new(
                        Status::InvalidArgument,
                        &format!("the disk directory is not UTF-8: {:?}", path),
                    )
                })?,
                "the disk directory",
            )?),
            None => None,
        };
        let remote = match &options.remote {
            Some(remote) => Some(c_string(remote, "the remote setting")?),
            None => None,
        };
        // SAFETY: kcache_options_init fills the whole struct; kcache copies the strings, which
        // live past the call.
        unsafe {
            let mut c = mem::MaybeUninit::<sys::kcache_options>::zeroed();
            sys::kcache_options_init(c.as_mut_ptr());
            let mut c = c.assume_init();
            c.max_entries = options.max_entries;
            c.verify = options.verify as c_int;
            c.host_compile = options.host_compile as c_int;
            c.memory_bytes = options.memory_bytes;
            c.disk_directory = directory.as_ref().map_or(ptr::null(), |d| d.as_ptr());
            c.read_only = options.read_only as c_int;
            c.remote = remote.as_ref().map_or(ptr::null(), |r| r.as_ptr());
            c.compile_workers = options.compile_workers;
            c.disk_max_bytes = options.disk_max_bytes;
            c.disk_max_files = options.disk_max_files;
            c.bundle_warm_ups = options.bundle_warm_ups as c_int;
            let mut raw = ptr::null_mut();
            let status = sys::kcache_cache_create(&c, &mut raw);
            Cache::made(status, raw)
        }
    }

    /// A new cache configured as the kcache command is: defaults, then kcache.conf, then the
    /// KCACHE_* environment. A setting that does not parse is an `InvalidArgument` naming it.
    pub fn from_env() -> Result<Cache> {
        let mut raw = ptr::null_mut();
        // SAFETY: an out parameter.
        let status = unsafe { sys::kcache_cache_create_from_env(&mut raw) };
        Cache::made(status, raw)
    }

    /// The process-wide cache (configured from the environment, lenient about bad settings,
    /// never destroyed): every call gives the same borrowed handle.
    pub fn global() -> Result<Cache> {
        let mut raw = ptr::null_mut();
        // SAFETY: an out parameter; dropping the borrowed handle is ignored by kcache.
        let status = unsafe { sys::kcache_cache_global(&mut raw) };
        Cache::made(status, raw)
    }

    /// The C handle, for calls this crate does not wrap; it stays owned by `self`.
    pub fn as_raw(&self) -> *mut sys::kcache_cache {
        self.raw
    }

    /// Looks `key` up for the current context's arch and gives its kernel `kernel_name`. Only on
    /// a miss, `make` runs (on this thread) and its source is compiled once however many threads
    /// ask; a failure is returned to every waiting thread and not cached. A miss needs a current
    /// CUDA context (`NoContext`, or `NoDriver` without a usable driver).
    pub fn kernel<F>(&self, key: &str, make: F, kernel_name: &str) -> Result<Kernel>
    where
        F: FnOnce() -> Made,
    {
        let key = c_string(key, "the key")?;
        let name = c_string(kernel_name, "the kernel name")?;
        let mut slot = Some(make);
        let (make, user_data) = generator(&mut slot);
        let mut out = ptr::null_mut();
        // SAFETY: the strings and the slot outlive the call, which runs the generator (if at
        // all) on this thread before it returns.
        check(unsafe {
            sys::kcache_cache_get_kernel(
                self.raw,
                key.as_ptr(),
                make,
                user_data,
                name.as_ptr(),
                &mut out,
            )
        })?;
        // SAFETY: on success kcache handed out a reference for us to release.
        Ok(unsafe { Kernel::from_raw(out) })
    }

    /// The same for the whole module.
    pub fn module<F>(&self, key: &str, make: F) -> Result<Module>
    where
        F: FnOnce() -> Made,
    {
        let key = c_string(key, "the key")?;
        let mut slot = Some(make);
        let (make, user_data) = generator(&mut slot);
        let mut out = ptr::null_mut();
        // SAFETY: as in `kernel`.
        check(unsafe {
            sys::kcache_cache_get_module(self.raw, key.as_ptr(), make, user_data, &mut out)
        })?;
        // SAFETY: as in `kernel`.
        Ok(unsafe { Module::from_raw(out) })
    }

    /// Compiles `key`'s source for `arch` (90 for sm_90) into the artifact tiers without loading
    /// it, so that a later process finds it on disk: no GPU needed. PTX needs nvJitLink for it
    /// (`Unsupported` otherwise); an arch no compiler takes is refused before `make` runs.
    pub fn prebuild<F>(&self, key: &str, make: F, arch: i32) -> Result<Provenance>
    where
        F: FnOnce() -> Made,
    {
        let key = c_string(key, "the key")?;
        let mut slot = Some(make);
        let (make, user_data) = generator(&mut slot);
        let mut provenance = sys::KCACHE_PROVENANCE_COMPILED;
        // SAFETY: as in `kernel`.
        check(unsafe {
            sys::kcache_cache_prebuild(
                self.raw,
                key.as_ptr(),
                make,
                user_data,
                arch as c_int,
                &mut provenance,
            )
        })?;
        Ok(Provenance::from_raw(provenance))
    }

    /// Makes the items' artifacts on up to `threads` worker threads (generators run there) and
    /// loads each on this thread, which needs a current context, as soon as it is ready. A
    /// failed item does not stop the others.
    pub fn warm_up(&self, items: Vec<WarmUpItem<'_>>, threads: u32) -> WarmUp {
        let mut items = items;
        let mut c_items: Vec<sys::kcache_warm_up_item> = items
            .iter_mut()
            .map(|item| {
                let (make, user_data) = generator(&mut item.make);
                sys::kcache_warm_up_item {
                    key: item.key.as_ptr(),
                    make,
                    user_data,
                    kernel_name: item.kernel_name.as_ptr(),
                    kernel: ptr::null_mut(),
                    status: sys::KCACHE_OK,
                }
            })
            .collect();
        // SAFETY: the items, their strings and their generators' slots outlive the call; the
        // generators are Send, and each slot is used by one generator call at most.
        let status = unsafe {
            sys::kcache_cache_warm_up(
                self.raw,
                c_items.as_mut_ptr(),
                c_items.len(),
                mem::size_of::<sys::kcache_warm_up_item>(),
                threads as c_uint,
            )
        };
        let error = check(status).err();
        let kernels = c_items
            .iter()
            .zip(items.iter())
            .map(|(c, item)| {
                if !c.kernel.is_null() {
                    // SAFETY: a kernel an item was given is ours to release.
                    let kernel = unsafe { Kernel::from_raw(c.kernel) };
                    if c.status == sys::KCACHE_OK {
                        return Ok(kernel);
                    }
                }
                let item_status = if c.status == sys::KCACHE_OK {
                    status // the call failed before it reached the item
                } else {
                    c.status
                };
                let item_status = Status::from_raw(item_status);
                Err(Error::new(
                    item_status,
                    &format!(
                        "warm-up of key '{}' failed (the warm-up's error says why)",
                        item.key.to_string_lossy()
                    ),
                ))
            })
            .collect();
        WarmUp { kernels, error }
    }

    /// Empties the map and resets the calling thread's counters; live handles keep working.
    /// Waits while another thread holds the exclusive guard; a thread holding it clears through
    /// [`Exclusive::clear`] (this call would wait for itself).
    pub fn clear(&self) -> Result<()> {
        // SAFETY: the cache is live.
        check(unsafe { sys::kcache_cache_clear(self.raw) })
    }

    /// Loaded (key, arch) entries in the map now.
    pub fn len(&self) -> usize {
        // SAFETY: the cache is live.
        unsafe { sys::kcache_cache_size(self.raw) }
    }

    /// True when nothing is loaded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Holds off every clear of this cache until dropped, so that a compile-then-hit sequence
    /// cannot be split by another thread's clear. Waits for another holder.
    pub fn exclusive(&self) -> Result<Exclusive<'_>> {
        let mut raw = ptr::null_mut();
        // SAFETY: an out parameter.
        check(unsafe { sys::kcache_cache_exclusive(self.raw, &mut raw) })?;
        Ok(Exclusive {
            raw,
            _cache: PhantomData,
        })
    }

    /// What the cache counted.
    pub fn stats(&self) -> Result<Stats> {
        let mut stats = Stats {
            struct_size: mem::size_of::<Stats>(),
            ..Stats::default()
        };
        // SAFETY: struct_size says how far kcache may write.
        check(unsafe { sys::kcache_cache_stats(self.raw, &mut stats) })?;
        Ok(stats)
    }
}

/// The exclusive guard of one cache (the seed's `kernel_cache_exclusive`): released when dropped,
/// on the thread that took it (it is not `Send`).
#[derive(Debug)]
pub struct Exclusive<'a> {
    raw: *mut sys::kcache_exclusive,
    // Borrows the cache, and the raw pointer keeps the guard on its thread.
    _cache: PhantomData<&'a Cache>,
}

impl Exclusive<'_> {
    /// Empties the cache without giving up exclusivity (and resets this thread's counters).
    pub fn clear(&self) -> Result<()> {
        // SAFETY: the guard is live.
        check(unsafe { sys::kcache_exclusive_clear(self.raw) })
    }
}

impl Drop for Exclusive<'_> {
    fn drop(&mut self) {
        // SAFETY: ours, released once, on the thread that took it (not Send).
        unsafe { sys::kcache_exclusive_release(self.raw) }
    }
}
