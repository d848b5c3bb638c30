// SPDX-License-Identifier: Apache-2.0
//! What the test binaries share: PTX kernels, temporary cache directories, a memory cache.
#![allow(dead_code)] // each test binary uses its own part of this

use std::fs;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use kcache::{Cache, Options};

/// x[tid] *= factor: nvJitLink compiles it for any arch kcache takes.
pub const SCALE_PTX: &str = ".version 7.8
.target sm_80
.address_size 64
.visible .entry scale(.param .u64 scale_x, .param .f32 scale_factor)
{
    .reg .b32 %r<2>;
    .reg .f32 %f<3>;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [scale_x];
    ld.param.f32 %f1, [scale_factor];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.f32 %f2, [%rd4];
    mul.f32 %f2, %f2, %f1;
    st.global.f32 [%rd4], %f2;
    ret;
}
";

/// out[i] = a[i] + b[i] for i < n (examples/ptx_kernels.cpp's residual_add), shared with the
/// Python package's tests.
pub const RESIDUAL_ADD_PTX: &str = include_str!("../../../testdata/residual_add.ptx");

/// PTX nvJitLink rejects: an instruction that does not exist.
pub const BAD_PTX: &str = ".version 7.8\n.target sm_80\n.address_size 64\n\
                           .visible .entry broken() { frobnicate.u32 %r1; ret; }\n";

pub const NOOP_PTX: &str =
    ".version 7.8\n.target sm_80\n.address_size 64\n.visible .entry noop() { ret; }\n";

/// A directory of the user's own, mode 0700, as kcache accepts for its disk tier; removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new() -> TempDir {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let path = std::env::temp_dir().join(format!(
            "kcache-rust-test-{}-{}-{}",
            std::process::id(),
            COUNT.fetch_add(1, Ordering::Relaxed),
            nanos
        ));
        fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .expect("a temporary directory");
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0); // a leftover in /tmp is no test failure
    }
}

/// Entries (`*.kc` files) below `dir`.
pub fn count_entries(dir: &Path) -> usize {
    let mut count = 0;
    if let Ok(entries) = fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                count += count_entries(&path);
            } else if path.extension().map_or(false, |e| e == "kc") {
                count += 1;
            }
        }
    }
    count
}

pub fn memory_cache() -> Cache {
    Cache::new(&Options::default()).expect("a memory cache")
}

pub fn cache_on(dir: &Path) -> Cache {
    Cache::new(&Options {
        disk_directory: Some(dir.to_path_buf()),
        ..Options::default()
    })
    .expect("a cache on disk")
}

/// Prebuilding PTX needs nvJitLink: without it a test can say nothing, and says so.
pub fn unsupported<T>(result: &kcache::Result<T>) -> bool {
    match result {
        Err(error) if error.status() == kcache::Status::Unsupported => {
            eprintln!("skipped: {}", error);
            true
        }
        _ => false,
    }
}
