// SPDX-License-Identifier: Apache-2.0
// The shape of one kernel launch: grid, block, dynamic shared memory, stream, and the extended
// options of cuLaunchKernelEx; what a kernel may be told before it launches; a module's globals.
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
    // Dynamic shared memory; above 48 KiB the kernel must first be allowed it
    // (KernelAttribute::kMaxDynamicSharedBytes).
    std::uint32_t shared_bytes = 0;
    // A CUstream, or nullptr for the context's default stream. Kept opaque so that this header
    // needs no CUDA header.
    void* stream = nullptr;
    // Thread block clusters (sm_90 and later): blocks per cluster in each dimension; the grid
    // must be a multiple of it. All zero: none, or the kernel's own __cluster_dims__.
    Dim3 cluster{0, 0, 0};
    // Every block resident at once, so that the grid may synchronise as a whole
    // (cooperative_groups::this_grid().sync()); the grid must fit on the device.
    bool cooperative = false;
    // Programmatic dependent launch: the kernel may start before the previous kernel in the
    // stream has finished, and waits for it where it says so (griddepcontrol.wait,
    // cudaGridDependencySynchronize); the previous one may release it early
    // (griddepcontrol.launch_dependents).
    bool programmatic_dependent_launch = false;
};

// Settings of a kernel that its launches depend on (CUfunction_attribute's settable ones). Set on
// a kernel handle, each applies to that kernel in every context it launches in, now and later.
enum class KernelAttribute : std::uint8_t {
    kMaxDynamicSharedBytes,    // the most dynamic shared memory a launch may ask for
    kPreferredSharedCarveout,  // percent of L1/shared memory to give shared memory (-1: any)
    kRequiredClusterWidth,     // a cluster shape the kernel requires (sm_90)
    kRequiredClusterHeight,
    kRequiredClusterDepth,
    kNonPortableClusterSizeAllowed,      // 1: clusters over 8 blocks where the device has them
    kClusterSchedulingPolicyPreference,  // CUclusterSchedulingPolicy's values
};

// The kernel's preference between L1 cache and shared memory (cuFuncSetCacheConfig).
enum class CacheConfig : std::uint8_t { kPreferNone, kPreferShared, kPreferL1, kPreferEqual };

// A module's __device__ or __constant__ variable in one context: its device address (a
// CUdeviceptr) and size in bytes.
struct DeviceGlobal {
    std::uint64_t address = 0;
    std::size_t size = 0;
};

}  // namespace kcache
