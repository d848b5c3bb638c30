// SPDX-License-Identifier: Apache-2.0
// Which NVRTC and nvJitLink this process compiles with, named without loading them and without a
// CUDA type, for src/compile: the loaded entry points stay in src/driver (compiler_api.hpp).
#pragma once

#include <string>

#include "kcache/result.hpp"

namespace kcache::driver {

// Which compiler library a compile would use, and its exact build, found without loading it:
// loading NVRTC or nvJitLink costs far more than a whole warm start, and a warm start needs only
// the identity (for the fingerprint), never the compiler.
struct CompilerIdentity {
    std::string path;   // the file that is then loaded, exactly
    std::string build;  // "build-id <hex>", or "size <bytes>" for a file without a build ID
};

// Found once per process: the environment override (KCACHE_NVRTC_LIBRARY,
// KCACHE_NVJITLINK_LIBRARY), else a copy already loaded in the process, else the first file in
// LD_LIBRARY_PATH, $CUDA_HOME, $CUDA_PATH, /usr/local/cuda and the system folders, else the
// loader's own choice. kUnsupported with every place tried when there is none.
const Result<CompilerIdentity>& nvrtc_identity();
const Result<CompilerIdentity>& nvjitlink_identity();

// Whether the identified library loads and has every entry point kcache calls (loading it, once
// per process); kUnsupported with the reason when it does not.
Result<void> nvrtc_usable();
Result<void> nvjitlink_usable();

}  // namespace kcache::driver
