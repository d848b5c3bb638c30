# SPDX-License-Identifier: Apache-2.0
"""Kernels for the tests and benchmarks: PTX as examples/ptx_kernels.cpp has it, and CUDA C++."""

from pathlib import Path

HEADER = ".version 7.8\n.target sm_70\n.address_size 64\n\n"

# .entry residual_add(.param .u64 out, .param .u64 a, .param .u64 b, .param .u32 n), shared with
# the Rust crate's tests.
RESIDUAL_ADD_PTX = (Path(__file__).resolve().parents[2] / "testdata" / "residual_add.ptx").read_text()

# .entry scale_kernel(.param .u64 data, .param .f32 factor, .param .u32 n): data[i] *= factor
SCALE_PTX = HEADER + r""".visible .entry scale_kernel(
    .param .u64 scale_kernel_data,
    .param .f32 scale_kernel_factor,
    .param .u32 scale_kernel_n
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<5>;

    ld.param.u64 %rd1, [scale_kernel_data];
    ld.param.f32 %f1, [scale_kernel_factor];
    ld.param.u32 %r1, [scale_kernel_n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.u32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra $L_done;

    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.u32 %rd3, %r5, 4;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.f32 %f2, [%rd4];
    mul.rn.f32 %f3, %f2, %f1;
    st.global.f32 [%rd4], %f3;

$L_done:
    ret;
}
"""

# .entry empty_kernel(): does nothing; for launch overhead.
EMPTY_PTX = HEADER + """.visible .entry empty_kernel()
{
    ret;
}
"""

# A templated CUDA C++ kernel with a header given as a string: y[i] = a * x[i] + y[i] + OFFSET.
AXPY_HEADER = "#pragma once\ntemplate <class T> __device__ T fma_of(T a, T x, T y) { return a * x + y; }\n"
AXPY_CUDA = r"""
#include "fma_of.h"
template <class T>
__global__ void axpy(T* y, const T* x, T a, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = fma_of(a, x[i], y[i]) + T(OFFSET);
}
"""
AXPY_NAME = "axpy<float>"

# An extern "C" kernel with no parameters, for the warm new process benchmark.
EMPTY_CUDA = 'extern "C" __global__ void empty_kernel() {}\n'

BAD_PTX = HEADER + ".visible .entry broken(\n{\n    this is not ptx;\n}\n"
BAD_CUDA = '__global__ void broken() { undeclared_identifier = 1; }\n'

# Reverses up to n floats through dynamic shared memory: with 200 KiB of it, a launch needs the
# kernel's MAX_DYNAMIC_SHARED_BYTES raised first.
REVERSE_SHARED_CUDA = r"""
extern "C" __global__ void reverse_shared(const float* in, float* out, unsigned n) {
    extern __shared__ float s[];
    for (unsigned i = threadIdx.x; i < n; i += blockDim.x) s[i] = in[i];
    __syncthreads();
    for (unsigned i = threadIdx.x; i < n; i += blockDim.x) out[i] = s[n - 1 - i];
}
"""

# Reads a __constant__ table the caller writes through Kernel.module_global("table").
CONSTANT_TABLE_CUDA = r"""
__constant__ float table[64];
extern "C" __global__ void lookup_table(const int* index, float* out, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = table[index[i] & 63];
}
"""

# Each block's rank in its thread block cluster (sm_90 and later).
CLUSTER_RANK_CUDA = r"""
extern "C" __global__ void cluster_rank(unsigned* out) {
    unsigned rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    if (threadIdx.x == 0) out[blockIdx.x] = rank;
}
"""
