// SPDX-License-Identifier: Apache-2.0
// Step 2 of a lookup: what a host compile of a Source needs, and what names its artifact in the
// tiers. A plan is made before any tier is asked and before any compiler runs.
#pragma once

#include <optional>

#include "compile/compiler.hpp"
#include "kcache/result.hpp"
#include "kcache/source.hpp"
#include "store/artifact_format.hpp"
#include "util/fingerprint.hpp"

namespace kcache::build {

struct BuildPlan {
    compile::Target target;
    util::Fingerprint fingerprint;   // the artifact's (build/fingerprints.hpp)
    store::KeyMaterial key;          // without the caller's key and kernel names
    util::Fingerprint source_bytes;  // util::bytes_hash of the source's bytes
    // PTX: the number its own names end in once renamed (build/unique_names.hpp); none for CUDA
    // C++, whose names NVRTC makes.
    std::optional<std::size_t> unique_names;
};

// nullopt: nothing to compile on the host (a binary, or PTX left to the driver's JIT: no
// nvJitLink, `host_compile` off, or an arch it cannot target). kInvalidArgument for a Source no
// compiler may see (options naming the arch, name expressions spanning lines, a header given
// twice, a bad arch); kUnsupported for CUDA C++ without NVRTC.
Result<std::optional<BuildPlan>> plan_build(int arch, const Source& source, bool host_compile);

}  // namespace kcache::build
