// SPDX-License-Identifier: Apache-2.0
//! Launch arguments without a GPU: each one's bytes and size come from its Rust type, which is
//! what kcache checks against the kernel's parameters.
use std::os::raw::c_void;

use kcache::{DevicePtr, Dim3, KernelArg};

fn bytes(arg: &dyn KernelArg) -> Vec<u8> {
    // SAFETY: arg_ptr points to arg_size bytes of the argument, which lives for this call.
    unsafe { std::slice::from_raw_parts(arg.arg_ptr() as *const u8, arg.arg_size()).to_vec() }
}

#[test]
fn each_arguments_size_and_bytes_are_its_types() {
    let n = 0x0102_0304u32;
    let x = DevicePtr::<f32>::new(0xdead_beef_0000_1000);
    let factor = 2.5f32;
    let wide = 7u64;
    let host: *const c_void = std::ptr::null();
    let args: [&dyn KernelArg; 5] = [&n, &x, &factor, &wide, &host];
    let sizes: Vec<usize> = args.iter().map(|a| a.arg_size()).collect();
    assert_eq!(sizes, [4, 8, 4, 8, 8]);
    assert_eq!(bytes(&n), n.to_ne_bytes());
    assert_eq!(bytes(&x), 0xdead_beef_0000_1000u64.to_ne_bytes());
    assert_eq!(bytes(&factor), factor.to_ne_bytes());
    assert_eq!(std::mem::size_of::<DevicePtr<f64>>(), 8);
}

#[repr(C)]
#[derive(Clone, Copy)]
struct Params {
    scale: f32,
    count: u32,
}
// SAFETY: #[repr(C)] plain data without padding.
unsafe impl KernelArg for Params {}

#[test]
fn a_struct_passed_by_value_is_its_whole_size() {
    let params = Params {
        scale: 1.0,
        count: 3,
    };
    assert_eq!(params.arg_size(), 8);
    assert_eq!(&bytes(&params)[4..], 3u32.to_ne_bytes());
}

#[test]
fn dimensions_fill_in_ones() {
    assert_eq!(Dim3::from(5), Dim3 { x: 5, y: 1, z: 1 });
    assert_eq!(Dim3::from((5, 6)), Dim3 { x: 5, y: 6, z: 1 });
    assert_eq!(Dim3::from((5, 6, 7)), Dim3 { x: 5, y: 6, z: 7 });
    assert_eq!(Dim3::from([5, 6, 7]), Dim3 { x: 5, y: 6, z: 7 });
}
