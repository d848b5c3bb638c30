// SPDX-License-Identifier: Apache-2.0
//! Handles to loaded code (`Module`, `Kernel`) and checked launches.
use std::ffi::CString;
use std::marker::PhantomData;
use std::os::raw::c_void;
use std::ptr::{self, NonNull};
use std::sync::Arc;

use crate::error::{check, static_str, Error, Result, Status};
use crate::sys;

/// A C string for an argument kcache takes, or an `InvalidArgument` naming it.
pub(crate) fn c_string(text: &str, what: &str) -> Result<CString> {
    CString::new(text).map_err(|_| {
        Error::new(
            Status::InvalidArgument,
            &format!("{} contains a NUL byte: {:?}", what, text),
        )
    })
}

/// Grid or block dimensions; a `u32` is `(x, 1, 1)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Dim3 {
    pub x: u32,
    pub y: u32,
    pub z: u32,
}

impl Dim3 {
    pub(crate) fn array(self) -> [u32; 3] {
        [self.x, self.y, self.z]
    }
}

impl From<u32> for Dim3 {
    fn from(x: u32) -> Dim3 {
        Dim3 { x, y: 1, z: 1 }
    }
}

impl From<(u32, u32)> for Dim3 {
    fn from((x, y): (u32, u32)) -> Dim3 {
        Dim3 { x, y, z: 1 }
    }
}

impl From<(u32, u32, u32)> for Dim3 {
    fn from((x, y, z): (u32, u32, u32)) -> Dim3 {
        Dim3 { x, y, z }
    }
}

impl From<[u32; 3]> for Dim3 {
    fn from([x, y, z]: [u32; 3]) -> Dim3 {
        Dim3 { x, y, z }
    }
}

/// A value a kernel takes as one parameter, passed by its bytes. kcache checks each argument's
/// size against the kernel's parameter before the driver sees it, so `&x` where a pointer is
/// expected is an `ArgumentMismatch`, not a crash in the kernel.
///
/// # Safety
/// The bytes from `arg_ptr` for `arg_size` bytes must be a valid value of the parameter's type
/// for as long as the reference lives: plain data (`#[repr(C)]`, no padding the kernel reads).
/// The defaults give the value's own bytes and size, right for the types this crate implements
/// it for.
pub unsafe trait KernelArg {
    /// Where the argument's bytes are.
    fn arg_ptr(&self) -> *const c_void {
        self as *const Self as *const c_void
    }
    /// How many bytes the parameter takes.
    fn arg_size(&self) -> usize {
        std::mem::size_of_val(self)
    }
}

macro_rules! plain_kernel_args {
    ($($t:ty),*) => { $(unsafe impl KernelArg for $t {})* };
}
plain_kernel_args!(u8, i8, u16, i16, u32, i32, u64, i64, usize, isize, f32, f64);
unsafe impl<T> KernelArg for *const T {}
unsafe impl<T> KernelArg for *mut T {}

/// A device address (`CUdeviceptr`) of `T`s: what a kernel's `.u64` pointer parameter takes.
#[repr(transparent)]
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct DevicePtr<T> {
    address: u64,
    _of: PhantomData<*const T>,
}

impl<T> Clone for DevicePtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for DevicePtr<T> {}
// An address is a number: which thread holds it does not matter.
unsafe impl<T> Send for DevicePtr<T> {}
unsafe impl<T> Sync for DevicePtr<T> {}
unsafe impl<T> KernelArg for DevicePtr<T> {}

impl<T> DevicePtr<T> {
    /// A device address as the driver gave it (`cuMemAlloc`).
    pub fn new(address: u64) -> DevicePtr<T> {
        DevicePtr {
            address,
            _of: PhantomData,
        }
    }
    /// The address.
    pub fn address(self) -> u64 {
        self.address
    }
}

/// A counted reference to one loaded module: its code stays loaded, through clear and eviction,
/// while a `Module` (or a kernel of it) lives. Clones share one reference.
#[derive(Clone)]
pub struct Module {
    raw: Arc<RawModule>,
}

struct RawModule(NonNull<sys::kcache_module>);

// kcache_module may be used by several threads at once; the last clone releases it.
unsafe impl Send for RawModule {}
unsafe impl Sync for RawModule {}

impl Drop for RawModule {
    fn drop(&mut self) {
        // SAFETY: the handle is ours, and no other use of it can run once the last clone drops.
        unsafe { sys::kcache_module_release(self.0.as_ptr()) }
    }
}

impl Module {
    /// # Safety
    /// `raw` is a module handle kcache handed out, whose reference this value now owns.
    pub(crate) unsafe fn from_raw(raw: *mut sys::kcache_module) -> Module {
        Module {
            raw: Arc::new(RawModule(
                NonNull::new(raw).expect("kcache gave a NULL module"),
            )),
        }
    }

    fn ptr(&self) -> *const sys::kcache_module {
        self.raw.0.as_ptr()
    }

    /// The kernel `name` of this module.
    pub fn kernel(&self, name: &str) -> Result<Kernel> {
        let name = c_string(name, "the kernel name")?;
        let mut out = ptr::null_mut();
        // SAFETY: the module handle is live; the name lives for the call.
        check(unsafe { sys::kcache_module_get_kernel(self.ptr(), name.as_ptr(), &mut out) })?;
        // SAFETY: on success kcache handed out a reference for us to release.
        Ok(unsafe { Kernel::from_raw(out) })
    }

    /// The key the module was looked up by.
    pub fn key(&self) -> &str {
        // SAFETY: the string lives as long as the module handle, which `self` keeps.
        unsafe { static_str(sys::kcache_module_key(self.ptr())) }
    }

    /// Its arch (90 for sm_90).
    pub fn arch(&self) -> i32 {
        // SAFETY: the module handle is live.
        unsafe { sys::kcache_module_arch(self.ptr()) }
    }

    /// The fingerprint (hex) of the artifact it was loaded from, as `kcache ls` names it; ""
    /// for code no tier holds.
    pub fn fingerprint(&self) -> &str {
        // SAFETY: as for `key`.
        unsafe { static_str(sys::kcache_module_fingerprint(self.ptr())) }
    }

    /// The C handle, for calls this crate does not wrap; it stays owned by `self`.
    pub fn as_raw(&self) -> *const sys::kcache_module {
        self.ptr()
    }
}

/// A counted reference to one kernel, which launches with no lookup. Clones are references of
/// their own (`kcache_kernel_clone`).
pub struct Kernel {
    raw: NonNull<sys::kcache_kernel>,
}

// A kcache_kernel may be launched and queried by several threads at once; releasing takes
// `self` by value, so it cannot race with a use.
unsafe impl Send for Kernel {}
unsafe impl Sync for Kernel {}

impl Drop for Kernel {
    fn drop(&mut self) {
        // SAFETY: the reference is ours and nothing else uses it through `self` any more.
        unsafe { sys::kcache_kernel_release(self.raw.as_ptr()) }
    }
}

impl Clone for Kernel {
    fn clone(&self) -> Kernel {
        let mut out = ptr::null_mut();
        // SAFETY: the handle is live. It can fail only for want of memory, which Rust's own
        // allocations answer with a panic too.
        match check(unsafe { sys::kcache_kernel_clone(self.raw.as_ptr(), &mut out) }) {
            Ok(()) => unsafe { Kernel::from_raw(out) },
            Err(error) => panic!("{}", error),
        }
    }
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernel")
            .field("name", &self.name())
            .finish()
    }
}

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Module")
            .field("key", &self.key())
            .field("arch", &self.arch())
            .field("fingerprint", &self.fingerprint())
            .finish()
    }
}

/// Launch arguments up to this count are gathered on the stack.
const INLINE_ARGS: usize = 16;

/// Calls `launch` with `args` as the C API takes them: one pointer to each value, and each
/// one's size from its Rust type.
pub(crate) fn with_args<R>(
    args: &[&dyn KernelArg],
    launch: impl FnOnce(*mut *mut c_void, *const usize) -> R,
) -> R {
    let fill = |pointers: &mut [*mut c_void], sizes: &mut [usize]| {
        for (i, arg) in args.iter().enumerate() {
            // The driver only reads through these: it copies each value.
            pointers[i] = arg.arg_ptr() as *mut c_void;
            sizes[i] = arg.arg_size();
        }
        launch(pointers.as_mut_ptr(), sizes.as_ptr())
    };
    if args.len() <= INLINE_ARGS {
        let mut pointers = [ptr::null_mut(); INLINE_ARGS];
        let mut sizes = [0usize; INLINE_ARGS];
        fill(&mut pointers, &mut sizes)
    } else {
        fill(
            &mut vec![ptr::null_mut(); args.len()],
            &mut vec![0usize; args.len()],
        )
    }
}

impl Kernel {
    /// # Safety
    /// `raw` is a kernel handle kcache handed out, whose reference this value now owns.
    pub(crate) unsafe fn from_raw(raw: *mut sys::kcache_kernel) -> Kernel {
        Kernel {
            raw: NonNull::new(raw).expect("kcache gave a NULL kernel"),
        }
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        // SAFETY: the string lives as long as the handle, which `self` keeps.
        unsafe { static_str(sys::kcache_kernel_name(self.raw.as_ptr())) }
    }

    /// Its parameter count as the driver reports it; `None` if it cannot tell.
    pub fn param_count(&self) -> Option<usize> {
        // SAFETY: the handle is live.
        let count = unsafe { sys::kcache_kernel_param_count(self.raw.as_ptr()) };
        if count < 0 {
            None
        } else {
            Some(count as usize)
        }
    }

    /// The C handle, for calls this crate does not wrap; it stays owned by `self`.
    pub fn as_raw(&self) -> *const sys::kcache_kernel {
        self.raw.as_ptr()
    }

    /// Launches in the calling thread's current context on `stream` (null: the default stream),
    /// checking the count of `args` and each one's size (from its Rust type) against the
    /// kernel's parameters first: a mismatch is an `ArgumentMismatch` naming the parameter.
    ///
    /// ```no_run
    /// # fn f(kernel: &kcache::Kernel, x: kcache::DevicePtr<f32>, n: u32) -> kcache::Result<()> {
    /// let factor = 2.0f32;
    /// unsafe { kernel.launch((n + 255) / 256, 256, 0, std::ptr::null_mut(), &[&x, &factor, &n]) }
    /// # }
    /// ```
    ///
    /// # Safety
    /// kcache checks what it can know: the count and sizes. What the kernel does with its
    /// arguments it cannot: device pointers must be valid for every access the kernel makes,
    /// `stream` a stream of the current context, and the memory unused by the host until the
    /// kernel is done.
    pub unsafe fn launch(
        &self,
        grid: impl Into<Dim3>,
        block: impl Into<Dim3>,
        shared_bytes: u32,
        stream: sys::CUstream,
        args: &[&dyn KernelArg],
    ) -> Result<()> {
        let (grid, block) = (grid.into().array(), block.into().array());
        with_args(args, |pointers, sizes| {
            check(sys::kcache_launch_sized(
                self.raw.as_ptr(),
                grid.as_ptr(),
                block.as_ptr(),
                shared_bytes,
                stream,
                pointers,
                sizes,
                args.len(),
            ))
        })
    }

    /// Launches as `cuLaunchKernel` takes arguments, one pointer to each value; only their count
    /// is checked. For callers whose arguments come as raw pointers (the seed's).
    ///
    /// # Safety
    /// As for [`Kernel::launch`], and each pointer points to a value of its parameter's type.
    pub unsafe fn launch_raw(
        &self,
        grid: impl Into<Dim3>,
        block: impl Into<Dim3>,
        shared_bytes: u32,
        stream: sys::CUstream,
        args: &mut [*mut c_void],
    ) -> Result<()> {
        let (grid, block) = (grid.into().array(), block.into().array());
        check(sys::kcache_launch(
            self.raw.as_ptr(),
            grid.as_ptr(),
            block.as_ptr(),
            shared_bytes,
            stream,
            args.as_mut_ptr(),
            args.len(),
        ))
    }
}
