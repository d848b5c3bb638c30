// SPDX-License-Identifier: Apache-2.0
// PTX text generators for a few inference-style kernels, plus CPU references to check their
// output against. Used by the kcache tests, benchmarks and demo.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kcache::examples {

// Every module is self-contained: `.version 7.8`, `.target sm_70`, `.address_size 64` and exactly
// one `.visible .entry`, so the driver can JIT it for any GPU from Volta up. All kernels use a 1-D
// grid with global thread index ctaid.x * ntid.x + tid.x, any block size, and guard the index.

// .entry residual_add(.param .u64 out, .param .u64 a, .param .u64 b, .param .u32 n)
// out[i] = a[i] + b[i] for i < n, float32.
std::string residual_add_ptx();

// .entry gelu(.param .u64 out, .param .u64 in, .param .u32 n)
// out[i] = 0.5 * x * (1 + tanh(0.7978845608 * (x + 0.044715 * x^3))), float32, for i < n.
std::string gelu_ptx();

// .entry softmax_rows(.param .u64 out, .param .u64 in, .param .u32 rows)
// One thread per row (global thread index = row, guarded by row < rows); the row length `cols`
// is baked into the PTX as an immediate, so each cols value is a distinct module (cache key
// "softmax:<cols>"). Numerically stable: max, sum of exp(x - max), then exp(x - max) / sum.
// `out` may equal `in`. Throws std::invalid_argument unless 1 <= cols <= 2^28. `name` renames
// the kernel (and its parameters): modules of distinct kernels.
std::string softmax_rows_ptx(int cols, std::string_view name = "softmax_rows");

// .entry empty_kernel() -- does nothing; used to time launch overhead.
std::string empty_kernel_ptx();

// .entry scale_kernel(.param .u64 data, .param .f32 factor, .param .u32 n)
// data[i] *= factor for i < n (a kernel with a 4-byte float parameter, for argument-size checks).
std::string scale_ptx();

// CPU references. Each returns a newly sized output vector.

// a[i] + b[i]; throws std::invalid_argument if the sizes differ.
std::vector<float> residual_add_ref(std::span<const float> a, std::span<const float> b);

// The tanh formula above, evaluated in double precision; for negative arguments 1 + tanh(u) is
// computed through the exact identity 2 / (1 + exp(-2u)) to avoid cancellation.
std::vector<float> gelu_ref(std::span<const float> in);

// Row-wise softmax of a row-major rows x cols matrix, in double precision; throws
// std::invalid_argument if rows or cols is negative or in.size() != rows * cols.
std::vector<float> softmax_rows_ref(std::span<const float> in, int rows, int cols);

// data[i] * factor in float32 (bit-identical to the kernel's mul.rn.f32).
std::vector<float> scale_ref(std::span<const float> data, float factor);

}  // namespace kcache::examples
