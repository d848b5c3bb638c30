// SPDX-License-Identifier: Apache-2.0
//! What a generator's kernels use beyond a plain launch: `cuLaunchKernelEx`'s options
//! (`LaunchConfig`), kernel attributes and cache preference, the native CUDA handles, and a
//! module's `__device__`/`__constant__` variables.
use std::os::raw::c_void;
use std::ptr;

use crate::error::{check, Result};
use crate::kernel::{c_string, with_args, Dim3, Kernel, KernelArg, Module};
use crate::sys;

/// How [`Kernel::launch_ex`] launches: grid and block, dynamic shared memory, stream, and the
/// options a plain launch lacks. Made by [`LaunchConfig::new`] (or `default()`: one block of one
/// thread), then chained calls of the fields' names, or the fields set directly.
///
/// ```
/// let config = kcache::LaunchConfig::new(8, 128).shared_bytes(64 * 1024).cluster(2);
/// assert_eq!(config.cluster, Some(kcache::Dim3 { x: 2, y: 1, z: 1 }));
/// assert!(!config.cooperative);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct LaunchConfig {
    pub grid: Dim3,
    pub block: Dim3,
    /// Dynamic shared memory per block, in bytes.
    pub shared_bytes: u32,
    /// A `CUstream` of the current context; null: its default stream.
    pub stream: sys::CUstream,
    /// Blocks per thread block cluster (sm_90); `None`: no clusters.
    pub cluster: Option<Dim3>,
    /// Every block resident at once (a grid-wide barrier).
    pub cooperative: bool,
    /// May start before the stream's previous kernel ends (`griddepcontrol.wait`).
    pub programmatic_dependent_launch: bool,
}

impl Default for LaunchConfig {
    /// As `kcache_launch_config_init`: one block of one thread, on the default stream, nothing
    /// else.
    fn default() -> LaunchConfig {
        LaunchConfig::new(1, 1)
    }
}

impl LaunchConfig {
    /// `grid` blocks of `block` threads on the default stream, without dynamic shared memory.
    pub fn new(grid: impl Into<Dim3>, block: impl Into<Dim3>) -> LaunchConfig {
        LaunchConfig {
            grid: grid.into(),
            block: block.into(),
            shared_bytes: 0,
            stream: ptr::null_mut(),
            cluster: None,
            cooperative: false,
            programmatic_dependent_launch: false,
        }
    }

    /// Blocks in the grid.
    pub fn grid(mut self, grid: impl Into<Dim3>) -> LaunchConfig {
        self.grid = grid.into();
        self
    }

    /// Threads in a block.
    pub fn block(mut self, block: impl Into<Dim3>) -> LaunchConfig {
        self.block = block.into();
        self
    }

    /// Dynamic shared memory per block; above 48 KiB the kernel must be allowed it first
    /// ([`KernelAttribute::MaxDynamicSharedBytes`]).
    pub fn shared_bytes(mut self, bytes: u32) -> LaunchConfig {
        self.shared_bytes = bytes;
        self
    }

    /// A `CUstream` of the current context (null: its default stream).
    pub fn stream(mut self, stream: sys::CUstream) -> LaunchConfig {
        self.stream = stream;
        self
    }

    /// Blocks per thread block cluster (sm_90); the grid must be a multiple of it.
    pub fn cluster(mut self, cluster: impl Into<Dim3>) -> LaunchConfig {
        self.cluster = Some(cluster.into());
        self
    }

    /// Every block resident at once, so that the grid may synchronise as a whole; the driver
    /// refuses a grid too large for that.
    pub fn cooperative(mut self, on: bool) -> LaunchConfig {
        self.cooperative = on;
        self
    }

    /// The kernel may start before the stream's previous kernel ends, and waits for it where it
    /// says (`griddepcontrol.wait`).
    pub fn programmatic_dependent_launch(mut self, on: bool) -> LaunchConfig {
        self.programmatic_dependent_launch = on;
        self
    }
}

impl From<&LaunchConfig> for sys::kcache_launch_config {
    /// The C struct, its `struct_size` this crate's: kcache then reads the fields this crate
    /// knows, whatever a newer library adds.
    fn from(config: &LaunchConfig) -> sys::kcache_launch_config {
        sys::kcache_launch_config {
            struct_size: std::mem::size_of::<sys::kcache_launch_config>(),
            grid: config.grid.array(),
            block: config.block.array(),
            shared_bytes: config.shared_bytes,
            stream: config.stream,
            cluster: config.cluster.map_or([0; 3], Dim3::array),
            cooperative: config.cooperative.into(),
            programmatic_dependent_launch: config.programmatic_dependent_launch.into(),
        }
    }
}

/// A setting of a kernel its launches depend on (`kcache_kernel_attribute`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KernelAttribute {
    /// Bytes of dynamic shared memory a launch may ask for (above 48 KiB needs this).
    MaxDynamicSharedBytes,
    /// Percent of L1 preferred as shared memory (-1: no preference).
    PreferredSharedCarveout,
    RequiredClusterWidth,
    RequiredClusterHeight,
    RequiredClusterDepth,
    /// Non-zero: clusters beyond the portable size (8 blocks) may be launched.
    NonPortableClusterSizeAllowed,
    ClusterSchedulingPolicyPreference,
}

impl KernelAttribute {
    /// The C value.
    pub fn raw(self) -> sys::kcache_kernel_attribute {
        match self {
            KernelAttribute::MaxDynamicSharedBytes => {
                sys::KCACHE_ATTRIBUTE_MAX_DYNAMIC_SHARED_BYTES
            }
            KernelAttribute::PreferredSharedCarveout => {
                sys::KCACHE_ATTRIBUTE_PREFERRED_SHARED_CARVEOUT
            }
            KernelAttribute::RequiredClusterWidth => sys::KCACHE_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH,
            KernelAttribute::RequiredClusterHeight => sys::KCACHE_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT,
            KernelAttribute::RequiredClusterDepth => sys::KCACHE_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH,
            KernelAttribute::NonPortableClusterSizeAllowed => {
                sys::KCACHE_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED
            }
            KernelAttribute::ClusterSchedulingPolicyPreference => {
                sys::KCACHE_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE
            }
        }
    }
}

/// A kernel's preference between L1 and shared memory (`kcache_cache_config`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CacheConfig {
    #[default]
    PreferNone,
    PreferShared,
    PreferL1,
    PreferEqual,
}

impl CacheConfig {
    /// The C value.
    pub fn raw(self) -> sys::kcache_cache_config {
        match self {
            CacheConfig::PreferNone => sys::KCACHE_PREFER_NONE,
            CacheConfig::PreferShared => sys::KCACHE_PREFER_SHARED,
            CacheConfig::PreferL1 => sys::KCACHE_PREFER_L1,
            CacheConfig::PreferEqual => sys::KCACHE_PREFER_EQUAL,
        }
    }
}

/// A module's `__device__` or `__constant__` variable in one context: where it is on the device
/// (a `CUdeviceptr`) and how many bytes it holds, for the caller to write or read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DeviceGlobal {
    pub address: u64,
    pub size: usize,
}

impl Kernel {
    /// Launches as [`Kernel::launch`] does (the count of `args` and each one's size, from its
    /// Rust type, checked first), with the config's options.
    ///
    /// # Safety
    /// As for [`Kernel::launch`]: device pointers valid for every access the kernel makes, the
    /// stream one of the current context, and a config the kernel is written for (a grid-wide
    /// barrier needs `cooperative`).
    pub unsafe fn launch_ex(&self, config: &LaunchConfig, args: &[&dyn KernelArg]) -> Result<()> {
        let raw = sys::kcache_launch_config::from(config);
        with_args(args, |pointers, sizes| {
            check(sys::kcache_launch_ex(
                self.as_raw(),
                &raw,
                pointers,
                sizes,
                args.len(),
            ))
        })
    }

    /// Sets an attribute of the kernel (shared by every handle to it) in every context it
    /// launches in, later ones too. A value the device refuses is an `InvalidArgument`, not kept.
    pub fn set_attribute(&self, attribute: KernelAttribute, value: i32) -> Result<()> {
        // SAFETY: the handle is live; the attribute is one of the C enumerators.
        check(unsafe { sys::kcache_kernel_set_attribute(self.as_raw(), attribute.raw(), value) })
    }

    /// Sets the kernel's preference between L1 and shared memory, as `set_attribute` does.
    pub fn set_cache_config(&self, config: CacheConfig) -> Result<()> {
        // SAFETY: as for `set_attribute`.
        check(unsafe { sys::kcache_kernel_set_cache_config(self.as_raw(), config.raw()) })
    }

    /// Its `CUfunction` in the calling thread's current context, for driver calls kcache does not
    /// make; valid while a handle to its module lives.
    pub fn native_function(&self) -> Result<*mut c_void> {
        let mut out = ptr::null_mut();
        // SAFETY: the handle is live; one out parameter.
        check(unsafe { sys::kcache_kernel_native_function(self.as_raw(), &mut out) })?;
        Ok(out)
    }

    /// Its `CUkernel` (every context), as `native_function`.
    pub fn native_kernel(&self) -> Result<*mut c_void> {
        let mut out = ptr::null_mut();
        // SAFETY: as for `native_function`.
        check(unsafe { sys::kcache_kernel_native_kernel(self.as_raw(), &mut out) })?;
        Ok(out)
    }
}

impl Module {
    /// The `__device__` or `__constant__` variable `name` in the calling thread's current context
    /// (each context has its own copy); `InvalidArgument` when the module has none of that name.
    pub fn global(&self, name: &str) -> Result<DeviceGlobal> {
        let name = c_string(name, "the global's name")?;
        let mut global = DeviceGlobal {
            address: 0,
            size: 0,
        };
        // SAFETY: the module handle is live; the name lives for the call; two out parameters.
        check(unsafe {
            sys::kcache_module_global(
                self.as_raw(),
                name.as_ptr(),
                &mut global.address,
                &mut global.size,
            )
        })?;
        Ok(global)
    }
}
