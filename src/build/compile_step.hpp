// SPDX-License-Identifier: Apache-2.0
// Step 4's compile: a planned Source through its compiler (NVRTC, in worker processes when there
// are any, or nvJitLink), to an executable cubin.
#pragma once

#include <optional>

#include "build/plan.hpp"
#include "compile/compiler.hpp"
#include "compile/worker_pool.hpp"
#include "kcache/result.hpp"
#include "kcache/source.hpp"

namespace kcache::build {

// The compiled cubin; nullopt when nvJitLink is there but cannot be used (another CUDA major's,
// say), so that the PTX goes to the driver's JIT as it did before there was a host compiler.
// kCompileFailed with the compiler's log; also for a cubin that would not load on its own
// (relocatable output), which must never be stored. `workers` may be null.
Result<std::optional<compile::Compiled>> compile_planned(const Source& source,
                                                         const BuildPlan& plan,
                                                         compile::WorkerPool* workers);

}  // namespace kcache::build
