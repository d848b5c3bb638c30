// SPDX-License-Identifier: Apache-2.0
//! The extended launch's config and the kernel settings without a GPU: what the Rust builder
//! hands C, the enums' C values, and the new calls refusing what they cannot use.
use std::mem::MaybeUninit;
use std::ptr;

use kcache::{sys, CacheConfig, Dim3, KernelAttribute, LaunchConfig};

fn c_default() -> sys::kcache_launch_config {
    let mut config = MaybeUninit::<sys::kcache_launch_config>::zeroed();
    // SAFETY: the struct is the header's (tests/layout.rs); init writes every field of it.
    unsafe {
        sys::kcache_launch_config_init(config.as_mut_ptr());
        config.assume_init()
    }
}

#[test]
fn a_default_launch_config_is_what_kcache_launch_config_init_gives() {
    let c = c_default();
    let rust = sys::kcache_launch_config::from(&LaunchConfig::default());
    assert_eq!(rust.struct_size, c.struct_size);
    assert_eq!(rust.grid, c.grid);
    assert_eq!(rust.block, c.block);
    assert_eq!(rust.shared_bytes, c.shared_bytes);
    assert_eq!(rust.stream, c.stream);
    assert_eq!(rust.cluster, c.cluster);
    assert_eq!(rust.cooperative, c.cooperative);
    assert_eq!(
        rust.programmatic_dependent_launch,
        c.programmatic_dependent_launch
    );
    assert_eq!(c.grid, [1, 1, 1]);
    assert_eq!(c.cluster, [0, 0, 0], "no cluster unless asked");
}

#[test]
fn the_builder_sets_each_field_of_the_c_struct() {
    let stream = 0x1234usize as kcache::CUstream;
    let config = LaunchConfig::new((4, 2), 128)
        .shared_bytes(100 * 1024)
        .stream(stream)
        .cluster((2, 1, 1))
        .cooperative(true)
        .programmatic_dependent_launch(true);
    assert_eq!(config.grid, Dim3 { x: 4, y: 2, z: 1 });
    assert_eq!(config.cluster, Some(Dim3 { x: 2, y: 1, z: 1 }));
    let raw = sys::kcache_launch_config::from(&config);
    assert_eq!(
        raw.struct_size,
        std::mem::size_of::<sys::kcache_launch_config>()
    );
    assert_eq!(raw.grid, [4, 2, 1]);
    assert_eq!(raw.block, [128, 1, 1]);
    assert_eq!(raw.shared_bytes, 100 * 1024);
    assert_eq!(raw.stream, stream);
    assert_eq!(raw.cluster, [2, 1, 1]);
    assert_eq!((raw.cooperative, raw.programmatic_dependent_launch), (1, 1));

    // Later calls replace earlier ones; switching an option off writes 0.
    let again = config.grid(7).block((8, 8)).cooperative(false);
    let raw = sys::kcache_launch_config::from(&again);
    assert_eq!((raw.grid, raw.block), ([7, 1, 1], [8, 8, 1]));
    assert_eq!(raw.cooperative, 0);
}

#[test]
fn the_attribute_and_cache_preference_enums_are_the_c_values() {
    let attributes = [
        (
            KernelAttribute::MaxDynamicSharedBytes,
            sys::KCACHE_ATTRIBUTE_MAX_DYNAMIC_SHARED_BYTES,
        ),
        (
            KernelAttribute::PreferredSharedCarveout,
            sys::KCACHE_ATTRIBUTE_PREFERRED_SHARED_CARVEOUT,
        ),
        (
            KernelAttribute::RequiredClusterWidth,
            sys::KCACHE_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH,
        ),
        (
            KernelAttribute::RequiredClusterHeight,
            sys::KCACHE_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT,
        ),
        (
            KernelAttribute::RequiredClusterDepth,
            sys::KCACHE_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH,
        ),
        (
            KernelAttribute::NonPortableClusterSizeAllowed,
            sys::KCACHE_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
        ),
        (
            KernelAttribute::ClusterSchedulingPolicyPreference,
            sys::KCACHE_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE,
        ),
    ];
    for (attribute, raw) in attributes {
        assert_eq!(attribute.raw(), raw, "{:?}", attribute);
    }
    let configs = [
        (CacheConfig::PreferNone, sys::KCACHE_PREFER_NONE),
        (CacheConfig::PreferShared, sys::KCACHE_PREFER_SHARED),
        (CacheConfig::PreferL1, sys::KCACHE_PREFER_L1),
        (CacheConfig::PreferEqual, sys::KCACHE_PREFER_EQUAL),
    ];
    for (config, raw) in configs {
        assert_eq!(config.raw(), raw, "{:?}", config);
    }
    assert_eq!(CacheConfig::default(), CacheConfig::PreferNone);
}

#[test]
fn the_new_calls_refuse_null_handles_and_say_so() {
    let config = c_default();
    let mut out = 0x1usize as *mut std::os::raw::c_void;
    let (mut address, mut size) = (7u64, 7usize);
    // SAFETY: kcache checks each handle for NULL before using it, and clears out parameters.
    unsafe {
        assert_eq!(
            sys::kcache_launch_ex(ptr::null(), &config, ptr::null_mut(), ptr::null(), 0),
            sys::KCACHE_INVALID_ARGUMENT
        );
        assert_eq!(
            sys::kcache_kernel_set_attribute(
                ptr::null(),
                sys::KCACHE_ATTRIBUTE_MAX_DYNAMIC_SHARED_BYTES,
                1
            ),
            sys::KCACHE_INVALID_ARGUMENT
        );
        assert_eq!(
            sys::kcache_kernel_set_cache_config(ptr::null(), sys::KCACHE_PREFER_L1),
            sys::KCACHE_INVALID_ARGUMENT
        );
        assert_eq!(
            sys::kcache_kernel_native_function(ptr::null(), &mut out),
            sys::KCACHE_INVALID_ARGUMENT
        );
        assert!(out.is_null(), "the out parameter is cleared on failure");
        out = 0x1usize as *mut std::os::raw::c_void;
        assert_eq!(
            sys::kcache_kernel_native_kernel(ptr::null(), &mut out),
            sys::KCACHE_INVALID_ARGUMENT
        );
        assert!(out.is_null());
        let name = b"table\0";
        assert_eq!(
            sys::kcache_module_global(ptr::null(), name.as_ptr().cast(), &mut address, &mut size),
            sys::KCACHE_INVALID_ARGUMENT
        );
        assert_eq!((address, size), (0, 0));
        let message = std::ffi::CStr::from_ptr(sys::kcache_last_error_message());
        assert!(
            message.to_string_lossy().contains("kcache_module_global"),
            "{:?}",
            message
        );
    }
}
