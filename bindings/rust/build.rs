// SPDX-License-Identifier: Apache-2.0
//! Finds libkcache: `KCACHE_LIB_DIR` (a folder holding libkcache.so, such as the CMake build
//! folder), else `pkg-config --libs kcache`, else a build error that says how to point at it.
//! The shared library is linked, with an rpath to the folder it was found in, so that tests and
//! programs run without LD_LIBRARY_PATH.
use std::env;
use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=KCACHE_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");

    if let Some(dir) = env::var_os("KCACHE_LIB_DIR") {
        let dir = Path::new(&dir);
        if !dir.join("libkcache.so").exists() {
            fail(&format!(
                "KCACHE_LIB_DIR={} holds no libkcache.so: build it first \
                 (cmake --build build --target kcache) or point KCACHE_LIB_DIR at the folder \
                 that has it",
                dir.display()
            ));
        }
        link_from(&dir.display().to_string());
        println!("cargo:rustc-link-lib=dylib=kcache");
        return;
    }

    match Command::new("pkg-config")
        .args(["--libs", "kcache"])
        .output()
    {
        Ok(output) if output.status.success() => {
            let libs = String::from_utf8_lossy(&output.stdout).into_owned();
            let mut linked = false;
            for flag in libs.split_whitespace() {
                if let Some(dir) = flag.strip_prefix("-L") {
                    link_from(dir);
                } else if let Some(name) = flag.strip_prefix("-l") {
                    println!("cargo:rustc-link-lib=dylib={}", name);
                    linked = linked || name == "kcache";
                }
            }
            if !linked {
                println!("cargo:rustc-link-lib=dylib=kcache");
            }
        }
        found => {
            let why = match found {
                Ok(output) => String::from_utf8_lossy(&output.stderr).trim().to_string(),
                Err(error) => format!("pkg-config could not be run: {}", error),
            };
            fail(&format!(
                "libkcache was not found.\n  pkg-config --libs kcache: {}\n  Set \
                 KCACHE_LIB_DIR to the folder that holds libkcache.so (the CMake build folder, \
                 e.g. KCACHE_LIB_DIR=$PWD/build), or install kcache and let pkg-config find \
                 kcache.pc (PKG_CONFIG_PATH=<prefix>/lib/pkgconfig).",
                why
            ));
        }
    }
}

/// Stops the build with `message` (cargo shows a build script's stderr), without a backtrace.
fn fail(message: &str) -> ! {
    eprintln!("error: {}", message);
    std::process::exit(1);
}

/// Searches `dir` at link time and, through the rpath, at run time.
fn link_from(dir: &str) {
    println!("cargo:rustc-link-search=native={}", dir);
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir);
}
