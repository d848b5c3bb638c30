// SPDX-License-Identifier: Apache-2.0
// Which headers a CUDA C++ compile may read from disk: the toolkit's, which the compiler's
// identity covers, and others only where the program allows it (they are then not fingerprinted).
#pragma once

#include <string>
#include <vector>

#include "compile/compiler.hpp"
#include "kcache/result.hpp"

namespace kcache::compile {

// Before compiling: kInvalidArgument for an option that makes NVRTC read from disk what no
// fingerprint covers, unless the program allows disk headers.
Result<void> check_disk_options(const CudaProgram& program);

// After compiling: the files among those NVRTC `processed` (its trace) that no fingerprint
// covers, each once.
std::vector<std::string> disk_headers_of(const CudaProgram& program,
                                         const std::vector<std::string>& processed);

// The refusal of a compile that read `files` from disk without the program allowing it.
Error disk_headers_refused(const CudaProgram& program, const Target& target,
                           const std::vector<std::string>& files);

}  // namespace kcache::compile
