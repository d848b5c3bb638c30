// SPDX-License-Identifier: Apache-2.0
// How a module's code was had: compiled now, found in a tier, or taken as the caller gave it.
#pragma once

#include <cstdint>

namespace kcache {

enum class Provenance : std::uint8_t {
    kCompiled,    // compiled on the host now (NVRTC or nvJitLink) and put to every tier
    kDriverJit,   // PTX handed to the driver's JIT: nothing is stored
    kMemoryTier,  // found in this process's memory tier
    kDiskTier,    // found in the disk tier
    kBinary,      // the caller's cubin or fatbin: nothing to compile or keep
    kRemoteTier,  // found in the remote tier (Redis), checked, and written to the disk tier
};

// "compiled", "driver JIT", "memory tier", "disk tier", "binary", "remote tier".
const char* provenance_name(Provenance provenance) noexcept;

}  // namespace kcache
