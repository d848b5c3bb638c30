// SPDX-License-Identifier: Apache-2.0
//! Caches from the environment. One test in its own binary: it changes the environment, which
//! no other kcache call may read meanwhile.
mod common;

use common::*;
use kcache::{Cache, Source, Status};

#[test]
fn a_cache_from_the_environment_uses_kcache_dir_and_names_a_bad_setting() {
    let dir = TempDir::new();
    std::env::set_var("KCACHE_DIR", dir.path());
    let cache = Cache::from_env().unwrap();
    let built = cache.prebuild("scale:f32", || Ok(Source::ptx(SCALE_PTX)), 90);
    if !unsupported(&built) {
        built.unwrap();
        assert_eq!(cache.stats().unwrap().disk_enabled, 1);
        assert_eq!(count_entries(dir.path()), 1);
    }
    drop(cache);

    std::env::set_var("KCACHE_DISK", "0");
    std::env::set_var("KCACHE_COMPILE_WORKERS", "several");
    let error = Cache::from_env().expect_err("a bad setting");
    assert_eq!(error.status(), Status::InvalidArgument);
    assert!(
        error.message().starts_with("invalid-argument: "),
        "{}",
        error
    );
    assert!(
        error.message().contains("KCACHE_COMPILE_WORKERS"),
        "{}",
        error
    );
    std::env::remove_var("KCACHE_COMPILE_WORKERS");
    std::env::remove_var("KCACHE_DISK");
    std::env::remove_var("KCACHE_DIR");
}
