// SPDX-License-Identifier: Apache-2.0
//! Caches without a GPU: options, prebuilds of PTX and CUDA C++ into a disk tier (nvJitLink and
//! NVRTC run on the host), statistics, clear, the exclusive guard and the version.
mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use common::*;
use kcache::{Cache, Options, Provenance, Source, Status};

#[test]
fn the_library_is_the_version_this_crate_was_written_for() {
    let header = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../include/kcache/version.hpp"
    ))
    .expect("include/kcache/version.hpp");
    let line = format!("#define KCACHE_VERSION \"{}\"", kcache::version());
    assert!(
        header.lines().any(|l| l == line),
        "{} not in version.hpp",
        line
    );
    assert_eq!(kcache::version(), kcache::CRATE_VERSION);
}

#[test]
fn default_options_are_kcaches_defaults() {
    let options = Options::default();
    assert_eq!(options.max_entries, 1024);
    assert!(!options.verify);
    assert!(options.host_compile);
    assert_eq!(options.memory_bytes, 256 << 20);
    assert_eq!(options.disk_directory, None);
    assert_eq!(options.remote, None);
    assert_eq!(options.compile_workers, 0);
    assert_eq!(options.disk_max_bytes, 4 << 30);
    assert_eq!(options.disk_max_files, 0);
    assert!(options.bundle_warm_ups);
}

#[test]
fn options_beyond_their_limits_are_refused_naming_them() {
    let error = Cache::new(&Options {
        compile_workers: 100_000,
        ..Options::default()
    })
    .expect_err("refused");
    assert_eq!(error.status(), Status::InvalidArgument);
    assert!(error.message().contains("compile_workers"), "{}", error);
}

#[test]
fn a_prebuild_of_ptx_fills_the_disk_tier_and_is_counted_once() {
    let dir = TempDir::new();
    let cache = cache_on(dir.path());
    let mut calls = 0;
    let first = cache.prebuild(
        "scale:f32",
        || {
            calls += 1;
            Ok(Source::ptx(SCALE_PTX))
        },
        90,
    );
    if unsupported(&first) {
        return;
    }
    assert_eq!(first.unwrap(), Provenance::Compiled);
    let again = cache.prebuild("scale:f32", || Ok(Source::ptx(SCALE_PTX)), 90);
    assert_eq!(again.unwrap(), Provenance::MemoryTier);
    assert_eq!(calls, 1);
    assert_eq!(count_entries(dir.path()), 1);

    let stats = cache.stats().unwrap();
    assert_eq!(stats.prebuilds, 2);
    assert_eq!(stats.prebuild_compiles, 1);
    assert_eq!(stats.compiles, 1);
    assert_eq!(stats.disk_writes, 1);
    assert_eq!(stats.disk_enabled, 1);
    assert_eq!(stats.hits + stats.misses, 0, "a prebuild is no lookup");
    assert_eq!(stats.entries, 0, "nor is anything loaded");
    assert!(cache.is_empty());
    drop(cache);

    // A new cache on the same directory finds it on disk.
    let cache = cache_on(dir.path());
    let found = cache.prebuild("scale:f32", || Ok(Source::ptx(SCALE_PTX)), 90);
    assert_eq!(found.unwrap(), Provenance::DiskTier);
    assert_eq!(Provenance::DiskTier.name(), "disk tier");
    assert_eq!(count_entries(dir.path()), 1);
}

#[test]
fn a_prebuild_of_cuda_cpp_keeps_its_option_and_header_in_the_fingerprint() {
    let dir = TempDir::new();
    let cache = cache_on(dir.path());
    let offset = |n: &str| {
        let define = format!("-DN={}", n);
        move || {
            Ok(Source::cuda(
                "#include \"offset.h\"\n\
                 extern \"C\" __global__ void offset(float* x) { x[threadIdx.x] += OFFSET; }\n",
            )
            .option(define)
            .header("offset.h", "#define OFFSET (N * 2.0f)\n"))
        }
    };
    let first = cache.prebuild("offset", offset("1"), 80);
    if unsupported(&first) {
        return;
    }
    assert_eq!(first.unwrap(), Provenance::Compiled);
    // Another option is another artifact, even under the same key.
    assert_eq!(
        cache.prebuild("offset", offset("2"), 80).unwrap(),
        Provenance::Compiled
    );
    assert_eq!(
        cache.prebuild("offset", offset("1"), 80).unwrap(),
        Provenance::MemoryTier
    );
    assert_eq!(count_entries(dir.path()), 2);
}

#[test]
fn a_cubin_is_taken_as_it_is() {
    // Prebuilding a binary compiles nothing: it is stored as given.
    let cache = memory_cache();
    let provenance = cache
        .prebuild(
            "blob",
            || Ok(Source::cubin(vec![0x7f, b'E', b'L', b'F'])),
            90,
        )
        .unwrap();
    assert_eq!(provenance, Provenance::Binary);
    assert_eq!(cache.stats().unwrap().compiles, 0);
}

#[test]
fn clear_of_an_empty_cache_succeeds_and_resets_the_threads_counters() {
    let cache = memory_cache();
    cache.clear().unwrap();
    assert_eq!(cache.len(), 0);
    assert_eq!(kcache::thread_stats(), kcache::ThreadStats::default());
    kcache::reset_thread_stats();
}

#[test]
fn the_exclusive_guard_holds_off_another_threads_clear() {
    let cache = Arc::new(memory_cache());
    let guard = cache.exclusive().unwrap();
    let cleared = Arc::new(AtomicBool::new(false));
    let (started_tx, started_rx) = mpsc::channel();
    let clearer = {
        let (cache, cleared) = (Arc::clone(&cache), Arc::clone(&cleared));
        std::thread::spawn(move || {
            started_tx.send(()).unwrap();
            let result = cache.clear();
            cleared.store(true, Ordering::SeqCst);
            result
        })
    };
    started_rx.recv().unwrap();
    // The other thread is in its clear, or about to be: give it time to finish if it could.
    std::thread::sleep(Duration::from_millis(200));
    let cleared_while_held = cleared.load(Ordering::SeqCst);
    // The holder itself can still clear.
    guard.clear().unwrap();
    drop(guard);
    clearer.join().unwrap().unwrap();
    assert!(
        !cleared_while_held,
        "a clear landed while the guard was held"
    );
    assert!(cleared.load(Ordering::SeqCst));
}

#[test]
fn stats_of_a_fresh_cache_say_what_it_has() {
    let stats = memory_cache().stats().unwrap();
    assert_eq!(stats.struct_size, std::mem::size_of::<kcache::Stats>());
    assert_eq!(stats.hits + stats.misses + stats.compiles, 0);
    assert_eq!(stats.disk_enabled, 0);
    assert_eq!(stats.remote_enabled, 0);
}

#[test]
fn a_key_with_a_nul_byte_is_refused_before_kcache_sees_it() {
    let cache = memory_cache();
    let mut ran = false;
    let error = cache
        .prebuild(
            "bad\0key",
            || {
                ran = true;
                Ok(Source::ptx(NOOP_PTX))
            },
            90,
        )
        .unwrap_err();
    assert_eq!(error.status(), Status::InvalidArgument);
    assert!(
        error.message().starts_with("invalid-argument: the key"),
        "{}",
        error
    );
    assert!(!ran);
}
