// SPDX-License-Identifier: Apache-2.0
//! On a GPU: kernels launched through kcache on device memory, against a CPU reference, and the
//! seed's counters as its users read them. Without a driver or a device the tests say so and
//! pass, unless KCACHE_REQUIRE_GPU=1 (as on the GPU machine), which makes that a failure.
//!
//! The CUDA driver calls the tests need are loaded with dlopen, as kcache itself does, so that
//! this builds and runs everywhere and links no libcuda.
mod common;

use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_uint, c_void};

use common::*;
use kcache::seed::*;
// kcache::LaunchConfig goes by its full name here: the seed's has the same one.
use kcache::{Cache, CacheConfig, DevicePtr, Kernel, KernelAttribute, Source, Status};

extern "C" {
    fn dlopen(filename: *const c_char, flag: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
}
const RTLD_NOW: c_int = 2;

type CuResult = c_int;

/// The driver calls of the tests, from libcuda.so.1.
struct Cuda {
    init: unsafe extern "C" fn(c_uint) -> CuResult,
    device_get_count: unsafe extern "C" fn(*mut c_int) -> CuResult,
    device_get: unsafe extern "C" fn(*mut c_int, c_int) -> CuResult,
    primary_ctx_retain: unsafe extern "C" fn(*mut *mut c_void, c_int) -> CuResult,
    ctx_set_current: unsafe extern "C" fn(*mut c_void) -> CuResult,
    ctx_synchronize: unsafe extern "C" fn() -> CuResult,
    mem_alloc: unsafe extern "C" fn(*mut u64, usize) -> CuResult,
    mem_free: unsafe extern "C" fn(u64) -> CuResult,
    memcpy_htod: unsafe extern "C" fn(u64, *const c_void, usize) -> CuResult,
    memcpy_dtoh: unsafe extern "C" fn(*mut c_void, u64, usize) -> CuResult,
    device_get_attribute: unsafe extern "C" fn(*mut c_int, c_int, c_int) -> CuResult,
    func_get_attribute: unsafe extern "C" fn(*mut c_int, c_int, *mut c_void) -> CuResult,
}

const CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: c_int = 75;
const CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: c_int = 8;

unsafe fn symbol<T: Copy>(library: *mut c_void, name: &CStr) -> Option<T> {
    let address = dlsym(library, name.as_ptr());
    if address.is_null() {
        None
    } else {
        Some(std::mem::transmute_copy(&address))
    }
}

macro_rules! c {
    ($s:literal) => {
        CStr::from_bytes_with_nul(concat!($s, "\0").as_bytes()).unwrap()
    };
}

fn check(result: CuResult, what: &str) {
    assert_eq!(result, 0, "{} failed with CUresult {}", what, result);
}

/// Says why a test did nothing and returns None, or fails it under KCACHE_REQUIRE_GPU=1.
fn skip<T>(why: &str) -> Option<T> {
    if std::env::var("KCACHE_REQUIRE_GPU").map_or(false, |v| v == "1") {
        panic!("KCACHE_REQUIRE_GPU=1 but {}", why);
    }
    eprintln!("skipped: {}", why);
    None
}

/// Skips (returns None) without a driver or a device, unless KCACHE_REQUIRE_GPU=1. Every test
/// calls it first: it keeps the global cache off the user's disk cache before any kcache or
/// driver call can read the environment.
fn cuda() -> Option<Cuda> {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| std::env::set_var("KCACHE_DISK", "0"));
    // SAFETY: dlopen and dlsym with NUL-terminated names; each symbol gets its documented type.
    unsafe {
        let library = dlopen(c!("libcuda.so.1").as_ptr(), RTLD_NOW);
        if library.is_null() {
            return skip("no CUDA driver (libcuda.so.1)");
        }
        let loaded = (|| {
            Some(Cuda {
                init: symbol(library, c!("cuInit"))?,
                device_get_count: symbol(library, c!("cuDeviceGetCount"))?,
                device_get: symbol(library, c!("cuDeviceGet"))?,
                primary_ctx_retain: symbol(library, c!("cuDevicePrimaryCtxRetain"))?,
                ctx_set_current: symbol(library, c!("cuCtxSetCurrent"))?,
                ctx_synchronize: symbol(library, c!("cuCtxSynchronize"))?,
                mem_alloc: symbol(library, c!("cuMemAlloc_v2"))?,
                mem_free: symbol(library, c!("cuMemFree_v2"))?,
                memcpy_htod: symbol(library, c!("cuMemcpyHtoD_v2"))?,
                memcpy_dtoh: symbol(library, c!("cuMemcpyDtoH_v2"))?,
                device_get_attribute: symbol(library, c!("cuDeviceGetAttribute"))?,
                func_get_attribute: symbol(library, c!("cuFuncGetAttribute"))?,
            })
        })();
        let cuda = match loaded {
            Some(cuda) => cuda,
            None => return skip("libcuda.so.1 lacks a driver call these tests use"),
        };
        if (cuda.init)(0) != 0 {
            return skip("cuInit failed: no usable driver");
        }
        let mut count = 0;
        if (cuda.device_get_count)(&mut count) != 0 || count == 0 {
            return skip("no CUDA device");
        }
        Some(cuda)
    }
}

impl Cuda {
    /// Makes device 0's primary context current on the calling thread.
    fn make_current(&self) {
        // SAFETY: out parameters, and a context the driver gave.
        unsafe {
            let (mut device, mut context) = (0, std::ptr::null_mut());
            check((self.device_get)(&mut device, 0), "cuDeviceGet");
            check(
                (self.primary_ctx_retain)(&mut context, device),
                "cuDevicePrimaryCtxRetain",
            );
            check((self.ctx_set_current)(context), "cuCtxSetCurrent");
        }
    }

    fn upload(&self, data: &[f32]) -> DevicePtr<f32> {
        let bytes = std::mem::size_of_val(data);
        let mut address = 0;
        // SAFETY: a fresh allocation of `bytes`, filled from a slice of as many.
        unsafe {
            check((self.mem_alloc)(&mut address, bytes), "cuMemAlloc");
            check(
                (self.memcpy_htod)(address, data.as_ptr() as *const c_void, bytes),
                "cuMemcpyHtoD",
            );
        }
        DevicePtr::new(address)
    }

    fn download(&self, from: DevicePtr<f32>, count: usize) -> Vec<f32> {
        let mut out = vec![0f32; count];
        // SAFETY: `from` holds at least `count` floats; the copy waits for prior work.
        unsafe {
            check((self.ctx_synchronize)(), "cuCtxSynchronize");
            check(
                (self.memcpy_dtoh)(
                    out.as_mut_ptr() as *mut c_void,
                    from.address(),
                    count * std::mem::size_of::<f32>(),
                ),
                "cuMemcpyDtoH",
            );
        }
        out
    }

    /// The compute capability's major number of device 0 (9 for sm_90).
    fn arch_major(&self) -> i32 {
        let mut major = 0;
        // SAFETY: an out parameter; device 0 exists (cuda() checked the count).
        let rc = unsafe {
            (self.device_get_attribute)(&mut major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0)
        };
        check(rc, "cuDeviceGetAttribute");
        major
    }

    fn free(&self, pointer: DevicePtr<f32>) {
        // SAFETY: allocated by `upload`, freed once.
        unsafe { check((self.mem_free)(pointer.address()), "cuMemFree") };
    }
}

fn inputs(n: usize) -> (Vec<f32>, Vec<f32>) {
    let a = (0..n).map(|i| i as f32 * 0.5 - 100.0).collect();
    let b = (0..n).map(|i| 1.0 / (i as f32 + 1.0)).collect();
    (a, b)
}

#[test]
fn residual_add_through_a_kernel_handle_matches_the_cpu() {
    let cuda = match cuda() {
        Some(cuda) => cuda,
        None => return,
    };
    cuda.make_current();
    let cache = memory_cache();
    let n = 1000u32;
    let (a, b) = inputs(n as usize);
    let expected: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    let (da, db, dout) = (
        cuda.upload(&a),
        cuda.upload(&b),
        cuda.upload(&vec![0.0; a.len()]),
    );

    let mut calls = 0;
    let kernel = cache
        .kernel(
            "residual_add",
            || {
                calls += 1;
                Ok(Source::ptx(RESIDUAL_ADD_PTX))
            },
            "residual_add",
        )
        .unwrap();
    assert_eq!(kernel.name(), "residual_add");
    assert_eq!(kernel.param_count(), Some(4));
    let stream: kcache::CUstream = std::ptr::null_mut();
    // SAFETY: three buffers of n floats on the current context.
    unsafe { kernel.launch((n + 255) / 256, 256, 0, stream, &[&dout, &da, &db, &n]) }.unwrap();
    assert_eq!(cuda.download(dout, a.len()), expected);

    // The sizes come from the Rust types: an u64 where the kernel takes a u32 is refused, as is
    // a missing argument, before the driver sees either.
    let wide = n as u64;
    // SAFETY: refused before launching.
    let error = unsafe { kernel.launch(4, 256, 0, stream, &[&dout, &da, &db, &wide]) }.unwrap_err();
    assert_eq!(error.status(), Status::ArgumentMismatch, "{}", error);
    let error = unsafe { kernel.launch(4, 256, 0, stream, &[&dout, &da, &db]) }.unwrap_err();
    assert_eq!(error.status(), Status::ArgumentMismatch, "{}", error);

    // A second lookup is a hit: no generator, the same code; a clone launches too.
    let again = cache
        .kernel(
            "residual_add",
            || panic!("a hit runs no generator"),
            "residual_add",
        )
        .unwrap();
    let clone = again.clone();
    drop(again);
    let module = cache.module("residual_add", || panic!("a hit")).unwrap();
    assert_eq!(module.key(), "residual_add");
    assert!(module.arch() >= 70);
    let twice: Vec<f32> = expected.iter().zip(&b).map(|(x, y)| x + y).collect();
    // SAFETY: as above; out = out + b.
    unsafe { clone.launch(4, 256, 0, stream, &[&dout, &dout, &db, &n]) }.unwrap();
    assert_eq!(cuda.download(dout, a.len()), twice);
    assert_eq!(calls, 1);
    let stats = cache.stats().unwrap();
    assert_eq!(stats.misses, 1);
    assert!(stats.hits >= 2);
    for pointer in [da, db, dout] {
        cuda.free(pointer);
    }
}

#[test]
fn the_seeds_calls_launch_and_count_on_their_thread_only() {
    let cuda = match cuda() {
        Some(cuda) => cuda,
        None => return,
    };
    cuda.make_current();
    let n = 300u32;
    let (a, b) = inputs(n as usize);
    let expected: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    let (da, db, dout) = (
        cuda.upload(&a),
        cuda.upload(&b),
        cuda.upload(&vec![0.0; a.len()]),
    );

    // Holds off other clears between this test's compile and its hit, as the seed's tests do.
    let exclusive = kernel_cache_exclusive();
    exclusive.clear();
    reset_kernel_cache_stats();
    let module = get_or_compile_kernel(&(), "rust-seed:residual_add", RESIDUAL_ADD_PTX).unwrap();
    let kernel = module.kernel("residual_add").unwrap();
    let stream: kcache::CUstream = std::ptr::null_mut();
    let (mut out, mut pa, mut pb, mut count) = (dout.address(), da.address(), db.address(), n);
    let mut args = [
        &mut out as *mut u64 as *mut c_void,
        &mut pa as *mut u64 as *mut c_void,
        &mut pb as *mut u64 as *mut c_void,
        &mut count as *mut u32 as *mut c_void,
    ];
    let config = LaunchConfig::linear(n, 128);
    // SAFETY: the four arguments point to values of the kernel's parameter types.
    unsafe {
        compile_lock_launch(
            &(),
            &stream,
            "rust-seed:residual_add",
            RESIDUAL_ADD_PTX,
            "residual_add",
            &config,
            &mut args,
        )
    }
    .unwrap();
    assert_eq!(cuda.download(dout, a.len()), expected);
    assert_eq!((kernel_cache_misses(), kernel_cache_hits()), (1, 1));

    // Another thread's lookups never show in this thread's window.
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                cuda.make_current();
                reset_kernel_cache_stats();
                for _ in 0..10 {
                    get_or_compile_kernel(&(), "rust-seed:residual_add", RESIDUAL_ADD_PTX).unwrap();
                }
                assert_eq!((kernel_cache_misses(), kernel_cache_hits()), (0, 10));
            })
            .join()
            .unwrap();
    });
    assert_eq!((kernel_cache_misses(), kernel_cache_hits()), (1, 1));
    // SAFETY: launched with the wrong count: refused before the driver sees it.
    let error = unsafe { kernel.launch_raw(1, 32, 0, stream, &mut args[..3]) }.unwrap_err();
    assert_eq!(error.status(), Status::ArgumentMismatch);

    // The exclusive holder's clear empties the map and resets this thread's counters; the
    // module handed out keeps its code loaded.
    exclusive.clear();
    assert_eq!((kernel_cache_misses(), kernel_cache_hits()), (0, 0));
    assert_eq!(Cache::global().unwrap().len(), 0);
    drop(exclusive);
    // SAFETY: as above, with the kernel of a module that outlived the clear: out = a + b again.
    unsafe { kernel.launch_raw(config.grid, config.block, 0, stream, &mut args) }.unwrap();
    assert_eq!(cuda.download(dout, a.len()), expected);
    for pointer in [da, db, dout] {
        cuda.free(pointer);
    }
}

#[test]
fn warm_up_gives_kernels_that_launch() {
    let cuda = match cuda() {
        Some(cuda) => cuda,
        None => return,
    };
    cuda.make_current();
    let cache = memory_cache();
    let items = (0..4)
        .map(|i| {
            kcache::WarmUpItem::new(&format!("warm:{}", i), "residual_add", || {
                Ok(Source::ptx(RESIDUAL_ADD_PTX))
            })
            .unwrap()
        })
        .collect();
    let outcome = cache.warm_up(items, 2);
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    let n = 64u32;
    let (a, b) = inputs(n as usize);
    let expected: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    let (da, db, dout) = (
        cuda.upload(&a),
        cuda.upload(&b),
        cuda.upload(&vec![0.0; a.len()]),
    );
    for kernel in outcome.kernels {
        let kernel = kernel.unwrap();
        // SAFETY: three buffers of n floats.
        unsafe { kernel.launch(1, 64, 0, std::ptr::null_mut(), &[&dout, &da, &db, &n]) }.unwrap();
        assert_eq!(cuda.download(dout, a.len()), expected);
    }
    assert_eq!(
        cache.stats().unwrap().compiles,
        1,
        "one source, compiled once"
    );
    for pointer in [da, db, dout] {
        cuda.free(pointer);
    }
}

// ---- What real generators' kernels need beyond a plain launch --------------------------------

/// A lookup of CUDA C++, which NVRTC compiles: skipped (None) where there is no NVRTC.
fn nvrtc<T>(found: kcache::Result<T>) -> Option<T> {
    match found {
        Ok(value) => Some(value),
        Err(error) if error.status() == Status::Unsupported => skip(&error.to_string()),
        Err(error) => panic!("{}", error),
    }
}

fn cuda_source(code: &str) -> Source {
    Source::cuda(code).option("-std=c++17")
}

fn cuda_kernel(cache: &Cache, key: &str, code: &str, name: &str) -> Option<Kernel> {
    nvrtc(cache.kernel(key, || Ok(cuda_source(code)), name))
}

/// A buffer of `count` words no kernel writes by chance.
fn poisoned(cuda: &Cuda, count: usize) -> DevicePtr<f32> {
    cuda.upload(&vec![f32::from_bits(0xdead_beef); count])
}

fn words(floats: Vec<f32>) -> Vec<u32> {
    floats.into_iter().map(f32::to_bits).collect()
}

const SMEM_REVERSE: &str =
    "extern \"C\" __global__ void smem_reverse(float* out, const float* in, unsigned n) {
    extern __shared__ float s[];
    for (unsigned i = threadIdx.x; i < n; i += blockDim.x) s[i] = in[i];
    __syncthreads();
    for (unsigned i = threadIdx.x; i < n; i += blockDim.x) out[i] = s[n - 1 - i];
}
";

#[test]
fn a_kernel_given_100_kib_of_dynamic_shared_memory_launches_once_allowed() {
    let cuda = match cuda() {
        Some(cuda) => cuda,
        None => return,
    };
    cuda.make_current();
    let cache = memory_cache();
    let kernel = match cuda_kernel(&cache, "smem_reverse", SMEM_REVERSE, "smem_reverse") {
        Some(kernel) => kernel,
        None => return,
    };
    let bytes = 100 * 1024u32;
    let n = bytes / 4;
    let (data, _) = inputs(n as usize);
    let reversed: Vec<f32> = data.iter().rev().copied().collect();
    let (din, dout) = (cuda.upload(&data), poisoned(&cuda, n as usize));
    let config = kcache::LaunchConfig::new(1, 256).shared_bytes(bytes);

    // SAFETY: in and out hold n floats; the launch is refused, above 48 KiB, until allowed.
    let refused = unsafe { kernel.launch_ex(&config, &[&dout, &din, &n]) };
    assert!(
        refused.is_err(),
        "100 KiB of dynamic shared memory launched without the attribute"
    );
    kernel
        .set_attribute(KernelAttribute::MaxDynamicSharedBytes, bytes as i32)
        .unwrap();
    // SAFETY: as above.
    unsafe { kernel.launch_ex(&config, &[&dout, &din, &n]) }.unwrap();
    assert_eq!(cuda.download(dout, n as usize), reversed);

    // The sizes are checked as in a plain launch: a u64 count is refused before the driver.
    let wide = n as u64;
    // SAFETY: refused before launching.
    let error = unsafe { kernel.launch_ex(&config, &[&dout, &din, &wide]) }.unwrap_err();
    assert_eq!(error.status(), Status::ArgumentMismatch, "{}", error);

    // The native function says what the driver now holds for the kernel in this context.
    let function = kernel.native_function().unwrap();
    assert!(!function.is_null());
    let mut allowed = 0;
    // SAFETY: a CUfunction of the current context; an out parameter.
    check(
        unsafe {
            (cuda.func_get_attribute)(
                &mut allowed,
                CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                function,
            )
        },
        "cuFuncGetAttribute",
    );
    assert_eq!(allowed, bytes as i32);
    assert!(!kernel.native_kernel().unwrap().is_null());
    kernel.set_cache_config(CacheConfig::PreferShared).unwrap();
    // More than any device has is refused and not kept: the allowed size stays.
    let error = kernel
        .set_attribute(KernelAttribute::MaxDynamicSharedBytes, 1 << 30)
        .unwrap_err();
    assert_eq!(error.status(), Status::InvalidArgument, "{}", error);
    // SAFETY: as above.
    unsafe { kernel.launch_ex(&config, &[&dout, &din, &n]) }.unwrap();
    assert_eq!(cuda.download(dout, n as usize), reversed);
    for pointer in [din, dout] {
        cuda.free(pointer);
    }
}

#[test]
fn a_cluster_launch_gives_each_block_its_rank_in_its_cluster() {
    let cuda = match cuda() {
        Some(cuda) => cuda,
        None => return,
    };
    if cuda.arch_major() < 9 {
        eprintln!("skipped: clusters need sm_90");
        return;
    }
    cuda.make_current();
    let cache = memory_cache();
    let code = "extern \"C\" __global__ void cluster_rank(unsigned* out) {
    unsigned rank, size;
    asm volatile(\"mov.u32 %0, %%cluster_ctarank;\" : \"=r\"(rank));
    asm volatile(\"mov.u32 %0, %%cluster_nctarank;\" : \"=r\"(size));
    if (threadIdx.x == 0) out[blockIdx.x] = rank | (size << 16);
}
";
    let kernel = match cuda_kernel(&cache, "cluster_rank", code, "cluster_rank") {
        Some(kernel) => kernel,
        None => return,
    };
    let blocks = 8u32;
    let out = poisoned(&cuda, blocks as usize);
    // SAFETY: out holds a word per block.
    unsafe { kernel.launch_ex(&kcache::LaunchConfig::new(blocks, 32), &[&out]) }.unwrap();
    let alone: Vec<u32> = (0..blocks).map(|_| 1 << 16).collect();
    assert_eq!(
        words(cuda.download(out, blocks as usize)),
        alone,
        "without a cluster, each block is rank 0 of a cluster of one"
    );
    let config = kcache::LaunchConfig::new(blocks, 32).cluster(2);
    // SAFETY: as above.
    unsafe { kernel.launch_ex(&config, &[&out]) }.unwrap();
    let paired: Vec<u32> = (0..blocks).map(|b| (b % 2) | (2 << 16)).collect();
    assert_eq!(words(cuda.download(out, blocks as usize)), paired);
    cuda.free(out);
}

#[test]
fn a_constant_table_written_through_the_module_global_is_what_the_kernel_reads() {
    let cuda = match cuda() {
        Some(cuda) => cuda,
        None => return,
    };
    cuda.make_current();
    let cache = memory_cache();
    let code = "__constant__ float table[256];
extern \"C\" __global__ void scale_by_table(float* out, const float* in, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] * table[i % 256];
}
";
    let module = match nvrtc(cache.module("scale_by_table", || Ok(cuda_source(code)))) {
        Some(module) => module,
        None => return,
    };
    let kernel = module.kernel("scale_by_table").unwrap();
    let global = module.global("table").unwrap();
    assert_eq!(global.size, 256 * std::mem::size_of::<f32>());
    assert_ne!(global.address, 0);
    let n = 4096u32;
    let (data, _) = inputs(n as usize);
    let (din, dout) = (cuda.upload(&data), poisoned(&cuda, n as usize));
    for round in 0..2 {
        let table: Vec<f32> = (0..256)
            .map(|i| 1.0 + (i * (round + 1)) as f32 / 256.0)
            .collect();
        // SAFETY: the global holds 256 floats (its size, checked above).
        check(
            unsafe {
                (cuda.memcpy_htod)(global.address, table.as_ptr() as *const c_void, global.size)
            },
            "cuMemcpyHtoD",
        );
        // SAFETY: in and out hold n floats.
        unsafe {
            kernel.launch_ex(
                &kcache::LaunchConfig::new((n + 255) / 256, 256),
                &[&dout, &din, &n],
            )
        }
        .unwrap();
        let got = cuda.download(dout, n as usize);
        for (i, (value, x)) in got.iter().zip(&data).enumerate() {
            let want = x * table[i % 256];
            assert!(
                (value - want).abs() <= want.abs() * 1e-6,
                "round {}, element {}: {} where {} was expected",
                round,
                i,
                value,
                want
            );
        }
    }
    let error = module.global("no_such_table").unwrap_err();
    assert_eq!(error.status(), Status::InvalidArgument, "{}", error);
    for pointer in [din, dout] {
        cuda.free(pointer);
    }
}
