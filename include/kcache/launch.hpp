// SPDX-License-Identifier: Apache-2.0
// The shape of one kernel launch: grid, block, dynamic shared memory and stream.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kcache {

struct Dim3 {
    std::uint32_t x = 1, y = 1, z = 1;
};

struct LaunchConfig {
    Dim3 grid;
    Dim3 block;
    std::uint32_t shared_bytes = 0;
    // A CUstream, or nullptr for the context's default stream. Kept opaque so that this header
    // needs no CUDA header.
    void* stream = nullptr;
};

}  // namespace kcache
