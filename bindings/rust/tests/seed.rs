// SPDX-License-Identifier: Apache-2.0
//! The seed's calls over the process-wide cache, without a GPU: the per-thread counters, clear
//! and the exclusive guard (the seed's own tests, as behaviour), and errors that say why.
mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Once};
use std::time::Duration;

use common::*;
use kcache::seed::*;
use kcache::Cache;

/// The global cache reads the environment once: keep it off the user's disk cache. Every test
/// calls this first, so no kcache call runs while the environment changes.
fn setup() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| std::env::set_var("KCACHE_DISK", "0"));
}

fn assert_clean_stats() {
    reset_kernel_cache_stats();
    assert_eq!(kernel_cache_hits(), 0);
    assert_eq!(kernel_cache_misses(), 0);
}

#[test]
fn the_global_cache_is_one_borrowed_handle() {
    setup();
    let first = Cache::global().unwrap();
    let second = Cache::global().unwrap();
    assert_eq!(first.as_raw(), second.as_raw());
    drop(first); // ignored by kcache: it is borrowed
    let stats = second.stats().unwrap();
    assert_eq!(stats.disk_enabled, 0);
}

#[test]
fn stats_start_at_zero_and_reset_and_clear_are_idempotent() {
    setup();
    assert_clean_stats();
    for _ in 0..3 {
        reset_kernel_cache_stats();
        clear_kernel_cache();
    }
    assert_clean_stats();
}

#[test]
fn a_lookup_without_a_gpu_says_why() {
    setup();
    let error = get_or_compile_kernel(&(), "noop", NOOP_PTX).expect_err("no GPU");
    assert!(error.status().is_no_gpu(), "{}", error);
    let config = LaunchConfig::linear(1, 32);
    let stream: kcache::CUstream = std::ptr::null_mut();
    // SAFETY: nothing is launched without a GPU, and the kernel takes no arguments.
    let error =
        unsafe { compile_lock_launch(&(), &stream, "noop", NOOP_PTX, "noop", &config, &mut []) }
            .unwrap_err();
    assert!(error.status().is_no_gpu(), "{}", error);
}

#[test]
fn a_ptx_with_a_nul_byte_is_an_invalid_argument() {
    setup();
    let error = get_or_compile_kernel(&(), "nul", "\0").expect_err("refused");
    assert_eq!(error.status(), kcache::Status::InvalidArgument);
}

#[test]
fn clear_cannot_interleave_with_an_exclusive_holder() {
    setup();
    let cleared = Arc::new(AtomicBool::new(false));
    let exclusive = kernel_cache_exclusive();
    let (started_tx, started_rx) = mpsc::channel();
    let clearer = {
        let cleared = Arc::clone(&cleared);
        std::thread::spawn(move || {
            started_tx.send(()).unwrap();
            clear_kernel_cache();
            cleared.store(true, Ordering::SeqCst);
        })
    };
    started_rx.recv().unwrap();
    for _ in 0..50 {
        assert!(
            !cleared.load(Ordering::SeqCst),
            "clear_kernel_cache() completed while another caller held exclusivity"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    // The holder clears without giving exclusivity up.
    exclusive.clear();
    assert_eq!(Cache::global().unwrap().len(), 0);
    drop(exclusive);
    clearer.join().unwrap();
    assert!(cleared.load(Ordering::SeqCst));
}

#[test]
fn launch_config_linear_covers_every_element() {
    let config = LaunchConfig::linear(1000, 256);
    assert_eq!(config.grid, (4, 1, 1));
    assert_eq!(config.block, (256, 1, 1));
    assert_eq!(config.shared_mem, 0);
    assert_eq!(LaunchConfig::linear(256, 256).grid.0, 1);
}
