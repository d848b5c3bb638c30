// SPDX-License-Identifier: Apache-2.0
//! `sys` mirrors kcache.h: a C program compiled against the header prints each struct's size and
//! every field's offset, and the constants, which must equal the Rust declarations'. Skipped when
//! no C compiler (`cc`) is on PATH.
mod common;

use std::mem::MaybeUninit;
use std::process::Command;
use std::ptr::addr_of;

use kcache::sys;

/// (C expression, Rust value) pairs: the size of `$t`, the offset of each field.
macro_rules! layout {
    ($out:ident, $t:ident { $($field:ident),* $(,)? }) => {{
        let value = MaybeUninit::<sys::$t>::uninit();
        let base = value.as_ptr();
        $out.push((format!("sizeof({})", stringify!($t)), std::mem::size_of::<sys::$t>()));
        $(
            // SAFETY: addr_of! takes a field's address without reading it.
            let offset = unsafe { addr_of!((*base).$field) as usize - base as usize };
            $out.push((format!("offsetof({}, {})", stringify!($t), stringify!($field)), offset));
        )*
    }};
}

#[test]
fn the_rust_declarations_have_the_headers_layout_and_values() {
    let mut expected: Vec<(String, usize)> = Vec::new();
    layout!(
        expected,
        kcache_options {
            struct_size,
            max_entries,
            verify,
            host_compile,
            memory_bytes,
            disk_directory,
            read_only,
            remote,
            compile_workers,
            disk_max_bytes,
            disk_max_files,
            bundle_warm_ups,
        }
    );
    layout!(
        expected,
        kcache_warm_up_item {
            key,
            make,
            user_data,
            kernel_name,
            kernel,
            status
        }
    );
    layout!(
        expected,
        kcache_stats {
            struct_size,
            hits,
            misses,
            compiles,
            compile_failures,
            compile_ns,
            waits,
            evictions,
            verify_failures,
            code_gone,
            entries,
            loaded_libraries,
            memory_hits,
            disk_hits,
            read_backs,
            disk_misses,
            disk_rejected,
            disk_writes,
            disk_errors,
            disk_corrupt,
            disk_evicted,
            disk_evicted_bytes,
            prebuilds,
            prebuild_compiles,
            config_errors,
            remote_hits,
            remote_misses,
            remote_errors,
            remote_timeouts,
            remote_skipped,
            remote_corrupt,
            remote_signature_rejects,
            remote_too_large,
            remote_writes,
            remote_writes_exists,
            remote_write_errors,
            remote_writes_dropped,
            remote_breaker_openings,
            remote_lease_won,
            remote_lease_waited,
            remote_lease_wait_timeouts,
            remote_lease_takeovers,
            remote_bytes_in,
            remote_bytes_out,
            disk_enabled,
            disk_read_only,
            remote_enabled,
        }
    );
    layout!(
        expected,
        kcache_launch_config {
            struct_size,
            grid,
            block,
            shared_bytes,
            stream,
            cluster,
            cooperative,
            programmatic_dependent_launch,
        }
    );
    expected.push((
        "sizeof(kcache_kernel_attribute)".into(),
        std::mem::size_of::<sys::kcache_kernel_attribute>(),
    ));
    expected.push((
        "sizeof(kcache_cache_config)".into(),
        std::mem::size_of::<sys::kcache_cache_config>(),
    ));
    expected.push((
        "sizeof(kcache_status)".into(),
        std::mem::size_of::<sys::kcache_status>(),
    ));
    expected.push((
        "sizeof(kcache_provenance)".into(),
        std::mem::size_of::<sys::kcache_provenance>(),
    ));
    expected.push(("KCACHE_NUL_TERMINATED".into(), sys::KCACHE_NUL_TERMINATED));
    for (name, value) in [
        ("KCACHE_OK", sys::KCACHE_OK),
        ("KCACHE_NO_DRIVER", sys::KCACHE_NO_DRIVER),
        ("KCACHE_NO_CONTEXT", sys::KCACHE_NO_CONTEXT),
        ("KCACHE_COMPILE_FAILED", sys::KCACHE_COMPILE_FAILED),
        ("KCACHE_SOURCE_FAILED", sys::KCACHE_SOURCE_FAILED),
        ("KCACHE_KEY_CONFLICT", sys::KCACHE_KEY_CONFLICT),
        ("KCACHE_ARGUMENT_MISMATCH", sys::KCACHE_ARGUMENT_MISMATCH),
        ("KCACHE_KERNEL_NOT_FOUND", sys::KCACHE_KERNEL_NOT_FOUND),
        ("KCACHE_INVALID_ARGUMENT", sys::KCACHE_INVALID_ARGUMENT),
        ("KCACHE_DRIVER_ERROR", sys::KCACHE_DRIVER_ERROR),
        ("KCACHE_UNSUPPORTED", sys::KCACHE_UNSUPPORTED),
        ("KCACHE_CORRUPT_ENTRY", sys::KCACHE_CORRUPT_ENTRY),
        ("KCACHE_IO_ERROR", sys::KCACHE_IO_ERROR),
        ("KCACHE_ARTIFACT_GONE", sys::KCACHE_ARTIFACT_GONE),
        ("KCACHE_OUT_OF_MEMORY", sys::KCACHE_OUT_OF_MEMORY),
        ("KCACHE_INTERNAL_ERROR", sys::KCACHE_INTERNAL_ERROR),
        (
            "KCACHE_PROVENANCE_COMPILED",
            sys::KCACHE_PROVENANCE_COMPILED,
        ),
        (
            "KCACHE_PROVENANCE_DRIVER_JIT",
            sys::KCACHE_PROVENANCE_DRIVER_JIT,
        ),
        (
            "KCACHE_PROVENANCE_MEMORY_TIER",
            sys::KCACHE_PROVENANCE_MEMORY_TIER,
        ),
        (
            "KCACHE_PROVENANCE_DISK_TIER",
            sys::KCACHE_PROVENANCE_DISK_TIER,
        ),
        ("KCACHE_PROVENANCE_BINARY", sys::KCACHE_PROVENANCE_BINARY),
        (
            "KCACHE_PROVENANCE_REMOTE_TIER",
            sys::KCACHE_PROVENANCE_REMOTE_TIER,
        ),
        (
            "KCACHE_ATTRIBUTE_MAX_DYNAMIC_SHARED_BYTES",
            sys::KCACHE_ATTRIBUTE_MAX_DYNAMIC_SHARED_BYTES,
        ),
        (
            "KCACHE_ATTRIBUTE_PREFERRED_SHARED_CARVEOUT",
            sys::KCACHE_ATTRIBUTE_PREFERRED_SHARED_CARVEOUT,
        ),
        (
            "KCACHE_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH",
            sys::KCACHE_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH,
        ),
        (
            "KCACHE_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT",
            sys::KCACHE_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT,
        ),
        (
            "KCACHE_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH",
            sys::KCACHE_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH,
        ),
        (
            "KCACHE_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED",
            sys::KCACHE_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
        ),
        (
            "KCACHE_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE",
            sys::KCACHE_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE,
        ),
        ("KCACHE_PREFER_NONE", sys::KCACHE_PREFER_NONE),
        ("KCACHE_PREFER_SHARED", sys::KCACHE_PREFER_SHARED),
        ("KCACHE_PREFER_L1", sys::KCACHE_PREFER_L1),
        ("KCACHE_PREFER_EQUAL", sys::KCACHE_PREFER_EQUAL),
    ] {
        expected.push((name.to_string(), value as usize));
    }

    let dir = common::TempDir::new();
    let mut program = String::from(
        "#include <stddef.h>\n#include <stdio.h>\n#include <kcache/kcache.h>\nint main(void) {\n",
    );
    for (expression, _) in &expected {
        program += &format!("    printf(\"%zu\\n\", (size_t)({}));\n", expression);
    }
    program += "    return 0;\n}\n";
    let source = dir.path().join("layout.c");
    let binary = dir.path().join("layout");
    std::fs::write(&source, program).unwrap();
    let include = concat!(env!("CARGO_MANIFEST_DIR"), "/../../include");
    let compiled = match Command::new("cc")
        .args(["-std=c99", "-Wall", "-Werror", "-I", include, "-o"])
        .arg(&binary)
        .arg(&source)
        .status()
    {
        Ok(status) => status,
        Err(error) => {
            eprintln!("skipped: no C compiler (cc): {}", error);
            return;
        }
    };
    assert!(compiled.success(), "the layout program did not compile");
    let output = Command::new(&binary).output().unwrap();
    let printed = String::from_utf8(output.stdout).unwrap();
    let values: Vec<usize> = printed.lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(values.len(), expected.len());
    for ((expression, rust), c) in expected.iter().zip(values) {
        assert_eq!(*rust, c, "{}: Rust says {}, C says {}", expression, rust, c);
    }
}
