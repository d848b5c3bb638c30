// SPDX-License-Identifier: Apache-2.0
// XXH3 over bulk bytes (entry checksums, source hashes), compiled twice: for the x86-64 baseline
// (SSE2) and for AVX2, which hashes an entry in markedly less time. The variant is
// chosen once per process from the CPU's features; both give the same hashes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kcache::util::xxh3 {

struct Hash128 {
    std::uint64_t high = 0;
    std::uint64_t low = 0;
};

// One compiled variant. A state is an XXH3_state_t, opaque here.
struct Kernels {
    void* (*create_state)();
    void (*free_state)(void* state);
    void (*reset)(void* state);
    void (*update)(void* state, const void* data, std::size_t size);
    Hash128 (*digest)(const void* state);
    Hash128 (*hash128)(const void* data, std::size_t size);
};

const Kernels& baseline_kernels();  // xxh3_baseline.cpp
const Kernels& avx2_kernels();      // xxh3_avx2.cpp, built with -mavx2
// The variant this CPU runs: AVX2 where it has it (and the OS saves its registers).
const Kernels& kernels();

}  // namespace kcache::util::xxh3
