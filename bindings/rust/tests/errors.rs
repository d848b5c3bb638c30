// SPDX-License-Identifier: Apache-2.0
//! Errors without a GPU: compile failures with the compiler's log, lookups with no GPU, a
//! generator's own failures (an error, a panic), warm-up's per-item statuses, and messages that
//! belong to the thread whose call failed.
mod common;

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::*;
use kcache::{Source, Status, WarmUpItem};

#[test]
fn bad_ptx_is_a_compile_error_carrying_the_compilers_log() {
    let cache = memory_cache();
    let result = cache.prebuild("broken:1", || Ok(Source::ptx(BAD_PTX)), 90);
    if unsupported(&result) {
        return;
    }
    let error = result.unwrap_err();
    assert_eq!(error.status(), Status::CompileFailed);
    assert!(error.message().starts_with("compile-failed: "), "{}", error);
    assert!(error.message().contains("key 'broken:1'"), "{}", error);
    // The compiler's log names what it did not understand, and the message carries it.
    assert!(error.log().contains("frobnicate"), "{}", error.log());
    assert!(error.message().contains(error.log()));
    assert_eq!(error.to_string(), error.message());
    let boxed: Box<dyn std::error::Error> = Box::new(error);
    assert!(boxed.to_string().contains("frobnicate"));

    let stats = cache.stats().unwrap();
    assert_eq!(stats.compile_failures, 1);
    assert_eq!(stats.compiles, 0);
}

#[test]
fn an_arch_no_compiler_takes_is_refused_before_the_generator_runs() {
    let cache = memory_cache();
    let ran = Cell::new(false);
    let error = cache
        .prebuild(
            "noop",
            || {
                ran.set(true);
                Ok(Source::ptx(NOOP_PTX))
            },
            20,
        )
        .unwrap_err();
    assert_eq!(error.status(), Status::InvalidArgument);
    assert!(!ran.get());
}

#[test]
fn a_lookup_without_a_gpu_says_why_and_runs_no_generator() {
    // On a GPU machine the test thread has no current context: NoContext. Here: NoDriver.
    let cache = memory_cache();
    let calls = Cell::new(0);
    let make = || {
        calls.set(calls.get() + 1);
        Ok(Source::ptx(NOOP_PTX))
    };
    let error = cache.kernel("noop", make, "noop").expect_err("no GPU");
    assert!(error.status().is_no_gpu(), "{}", error);
    assert!(
        error.message().starts_with(error.status().name()),
        "{}",
        error
    );
    if error.status() == Status::NoDriver {
        assert!(error.message().contains("no CUDA driver"), "{}", error);
    }
    let error = cache.module("noop", make).expect_err("no GPU");
    assert!(error.status().is_no_gpu(), "{}", error);
    assert_eq!(calls.get(), 0);
    assert_eq!(cache.len(), 0);
}

#[test]
fn a_generators_own_error_is_the_lookups_error() {
    let cache = memory_cache();
    let error = cache
        .prebuild("warps:7", || Err("no variant for 7 warps".to_string()), 90)
        .unwrap_err();
    assert_eq!(error.status(), Status::SourceFailed);
    assert!(
        error.message().contains("source-failed: key 'warps:7'"),
        "{}",
        error
    );
    assert!(
        error.message().contains("no variant for 7 warps"),
        "{}",
        error
    );
}

#[test]
fn a_panicking_generator_fails_its_lookup_and_nothing_else() {
    let cache = memory_cache();
    let error = cache
        .prebuild("panics", || panic!("generator bug 42"), 90)
        .unwrap_err();
    assert_eq!(error.status(), Status::SourceFailed);
    assert!(error.message().contains("panicked"), "{}", error);
    assert!(error.message().contains("generator bug 42"), "{}", error);
    // Failures are not cached: the same key with a working generator builds.
    let again = cache.prebuild("panics", || Ok(Source::ptx(NOOP_PTX)), 90);
    if unsupported(&again) {
        return;
    }
    again.unwrap();
}

#[test]
fn a_nul_byte_in_an_option_fails_the_lookup_naming_it() {
    let cache = memory_cache();
    let error = cache
        .prebuild(
            "nul",
            || Ok(Source::cuda("extern \"C\" __global__ void k() {}").option("-DN=\0x")),
            90,
        )
        .unwrap_err();
    assert_eq!(error.status(), Status::SourceFailed);
    assert!(
        error.message().contains("an option contains a NUL byte"),
        "{}",
        error
    );
}

#[test]
fn warm_up_without_a_gpu_gives_each_item_its_status() {
    let cache = memory_cache();
    let calls = AtomicUsize::new(0);
    let item = |key: &str| {
        let calls = &calls;
        WarmUpItem::new(key, "noop", move || {
            calls.fetch_add(1, Ordering::SeqCst);
            Ok(Source::ptx(NOOP_PTX))
        })
        .unwrap()
    };
    let outcome = cache.warm_up(vec![item("noop:a"), item("noop:b")], 2);
    let error = outcome.error.expect("no GPU");
    assert!(error.status().is_no_gpu(), "{}", error);
    assert!(error.message().contains("2 of 2 items failed"), "{}", error);
    assert_eq!(outcome.kernels.len(), 2);
    for (kernel, key) in outcome.kernels.iter().zip(["noop:a", "noop:b"]) {
        let item_error = kernel.as_ref().expect_err("failed");
        assert_eq!(item_error.status(), error.status());
        assert!(item_error.message().contains(key), "{}", item_error);
    }
    assert_eq!(calls.load(Ordering::SeqCst), 0);

    // No items: nothing to do.
    let outcome = cache.warm_up(Vec::new(), 2);
    assert!(outcome.error.is_none() && outcome.kernels.is_empty());
    assert!(WarmUpItem::new("k\0", "noop", || Ok(Source::ptx(NOOP_PTX))).is_err());
}

#[test]
fn each_thread_gets_the_message_of_its_own_failure() {
    let cache = memory_cache();
    std::thread::scope(|scope| {
        let threads: Vec<_> = (0..4)
            .map(|i| {
                let cache = &cache;
                scope.spawn(move || {
                    for _ in 0..20 {
                        let error = cache
                            .prebuild(
                                &format!("thread:{}", i),
                                move || Err(format!("refused by thread {}", i)),
                                90,
                            )
                            .unwrap_err();
                        assert!(
                            error
                                .message()
                                .contains(&format!("refused by thread {}", i)),
                            "{}",
                            error
                        );
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
    });
}

#[test]
fn status_names_are_kcaches_words() {
    assert_eq!(Status::NoDriver.name(), "no-driver");
    assert_eq!(Status::CompileFailed.name(), "compile-failed");
    assert_eq!(Status::ArtifactGone.to_string(), "artifact-gone");
    assert_eq!(Status::InternalError.name(), "internal-error");
    assert_eq!(Status::Other(99).name(), "unknown");
    for raw in 1..=15 {
        let status = kcache::Status::Other(raw);
        // Every C value has a variant of its own, which goes back to the same value.
        let named = [
            Status::NoDriver,
            Status::NoContext,
            Status::CompileFailed,
            Status::SourceFailed,
            Status::KeyConflict,
            Status::ArgumentMismatch,
            Status::KernelNotFound,
            Status::InvalidArgument,
            Status::DriverError,
            Status::Unsupported,
            Status::CorruptEntry,
            Status::IoError,
            Status::ArtifactGone,
            Status::OutOfMemory,
            Status::InternalError,
        ][raw as usize - 1];
        assert_eq!(named.raw(), raw);
        assert_eq!(named.name(), status.name());
    }
}
