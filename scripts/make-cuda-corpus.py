#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Makes the CUDA C++ part of the benchmark corpus of issue 19: the templated kernels an inference
engine JITs through NVRTC. CUB's block-level templates from the toolkit's CCCL headers
(BlockReduce, BlockScan, BlockRadixSort, WarpReduce, BlockLoad/BlockStore) at several block sizes
and types, and CUTLASS-style templates written here (CUTLASS is not in the toolkit): a tiled GEMM
with shared-memory staging, fp32 accumulation and a fused epilogue (bias + ReLU/GELU), a row
softmax, a layer norm, and an RMS norm over cooperative groups. Several instantiations per source file, each named by the expression
that instantiates it (NVRTC's name expressions).

Written to OUT (default: $OUT or build/cuda-corpus) as cuda-corpus.tar.xz, which holds
  sources/<family>.cu   the CUDA C++ sources;
  manifest.json         per source: its file, NVRTC options and kernels (name expression, family,
                        element type, block size, elements or tile per block, grid rule);
  kernels.tsv           the same, one line per kernel, for the benchmark (no JSON reader in C++):
                        file, expression, family, type, block, per_block, options (space-joined).
Options name the toolkit's include folder as $CUDA_INCLUDE, which the reader replaces.

    python3 scripts/make-cuda-corpus.py [--out DIR] [--dir DIR] [--check KCACHE [--jobs N]]
    python3 scripts/make-cuda-corpus.py --compare bench/corpus/cuda-corpus.tar.xz

--dir also writes the unpacked tree there. --check KCACHE compiles every kernel through
`KCACHE compile --arch sm_90a` (a process per kernel, each into a fresh cache directory, N at a
time) and prints each kernel's time; no GPU needed.
"""
import argparse
import concurrent.futures
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

ARCH = "sm_90a"
CUB_OPTIONS = ["-std=c++17", "-I$CUDA_INCLUDE/cccl", "-I$CUDA_INCLUDE"]

# Element conversions every source shares: the kernels keep their element type in memory and
# compute in fp32, as inference kernels do.
PRELUDE = r"""#include <cuda_fp16.h>
#include <cuda_bf16.h>

namespace corpus {
__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(int x) { return static_cast<float>(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
template <class T> __device__ __forceinline__ T from_float(float x) { return static_cast<T>(x); }
template <> __device__ __forceinline__ __half from_float<__half>(float x) { return __float2half(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
    return __float2bfloat16(x);
}
}  // namespace corpus
"""

BLOCK_REDUCE = r"""#include <cub/block/block_reduce.cuh>

struct MaxOp {
    template <class T> __device__ __forceinline__ T operator()(const T& a, const T& b) const {
        return corpus::to_float(a) < corpus::to_float(b) ? b : a;
    }
};

// One tile of BLOCK * ITEMS elements per block; out[block] is its sum (as float).
template <class T, int BLOCK, int ITEMS>
__global__ void __launch_bounds__(BLOCK) block_reduce_sum(const T* in, float* out, int n) {
    using Reduce = cub::BlockReduce<T, BLOCK>;
    __shared__ typename Reduce::TempStorage storage;
    T items[ITEMS];
    const int base = blockIdx.x * BLOCK * ITEMS;
    for (int i = 0; i < ITEMS; ++i) {
        const int at = base + i * BLOCK + threadIdx.x;
        items[i] = at < n ? in[at] : corpus::from_float<T>(0.0f);
    }
    const T total = Reduce(storage).Sum(items);
    if (threadIdx.x == 0) out[blockIdx.x] = corpus::to_float(total);
}

// The same tile's maximum (padding repeats the tile's first element).
template <class T, int BLOCK, int ITEMS>
__global__ void __launch_bounds__(BLOCK) block_reduce_max(const T* in, float* out, int n) {
    using Reduce = cub::BlockReduce<T, BLOCK>;
    __shared__ typename Reduce::TempStorage storage;
    T items[ITEMS];
    const int base = blockIdx.x * BLOCK * ITEMS;
    for (int i = 0; i < ITEMS; ++i) {
        const int at = base + i * BLOCK + threadIdx.x;
        items[i] = in[at < n ? at : base];
    }
    const T best = Reduce(storage).Reduce(items, MaxOp{});
    if (threadIdx.x == 0) out[blockIdx.x] = corpus::to_float(best);
}
"""

BLOCK_SCAN = r"""#include <cub/block/block_load.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/block/block_store.cuh>

// A prefix sum of each tile of BLOCK * ITEMS elements (blocked arrangement).
template <class T, int BLOCK, int ITEMS>
__global__ void __launch_bounds__(BLOCK) block_inclusive_scan(const T* in, T* out) {
    using Scan = cub::BlockScan<T, BLOCK>;
    __shared__ typename Scan::TempStorage storage;
    T items[ITEMS];
    const int base = blockIdx.x * BLOCK * ITEMS;
    cub::LoadDirectBlocked(threadIdx.x, in + base, items);
    Scan(storage).InclusiveSum(items, items);
    cub::StoreDirectBlocked(threadIdx.x, out + base, items);
}

template <class T, int BLOCK, int ITEMS>
__global__ void __launch_bounds__(BLOCK) block_exclusive_scan(const T* in, T* out) {
    using Scan = cub::BlockScan<T, BLOCK, cub::BLOCK_SCAN_WARP_SCANS>;
    __shared__ typename Scan::TempStorage storage;
    T items[ITEMS];
    const int base = blockIdx.x * BLOCK * ITEMS;
    cub::LoadDirectBlocked(threadIdx.x, in + base, items);
    Scan(storage).ExclusiveSum(items, items);
    cub::StoreDirectBlocked(threadIdx.x, out + base, items);
}
"""

BLOCK_RADIX_SORT = r"""#include <cub/block/block_load.cuh>
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_store.cuh>

// Sorts each tile of BLOCK * ITEMS keys in place, ascending (a top-k's or a MoE router's step).
template <class K, int BLOCK, int ITEMS>
__global__ void __launch_bounds__(BLOCK) block_radix_sort_keys(K* keys) {
    using Sort = cub::BlockRadixSort<K, BLOCK, ITEMS>;
    __shared__ typename Sort::TempStorage storage;
    K items[ITEMS];
    const int base = blockIdx.x * BLOCK * ITEMS;
    cub::LoadDirectBlocked(threadIdx.x, keys + base, items);
    Sort(storage).Sort(items);
    cub::StoreDirectBlocked(threadIdx.x, keys + base, items);
}

template <class K, class V, int BLOCK, int ITEMS>
__global__ void __launch_bounds__(BLOCK) block_radix_sort_pairs(K* keys, V* values) {
    using Sort = cub::BlockRadixSort<K, BLOCK, ITEMS, V>;
    __shared__ typename Sort::TempStorage storage;
    K k[ITEMS];
    V v[ITEMS];
    const int base = blockIdx.x * BLOCK * ITEMS;
    cub::LoadDirectBlocked(threadIdx.x, keys + base, k);
    cub::LoadDirectBlocked(threadIdx.x, values + base, v);
    Sort(storage).SortDescending(k, v);
    cub::StoreDirectBlocked(threadIdx.x, keys + base, k);
    cub::StoreDirectBlocked(threadIdx.x, values + base, v);
}
"""

WARP_REDUCE = r"""#include <cub/warp/warp_reduce.cuh>

// Each warp sums its 32 elements: out[global warp] = that sum (as float).
template <class T, int BLOCK>
__global__ void __launch_bounds__(BLOCK) warp_reduce_sum(const T* in, float* out) {
    using Reduce = cub::WarpReduce<T>;
    __shared__ typename Reduce::TempStorage storage[BLOCK / 32];
    const int warp = threadIdx.x / 32;
    const T total = Reduce(storage[warp]).Sum(in[blockIdx.x * BLOCK + threadIdx.x]);
    if (threadIdx.x % 32 == 0) out[blockIdx.x * (BLOCK / 32) + warp] = corpus::to_float(total);
}
"""

BLOCK_LOAD_STORE = r"""#include <cub/block/block_load.cuh>
#include <cub/block/block_store.cuh>

// out = alpha * in over tiles of BLOCK * ITEMS, through CUB's load and store algorithms.
template <class T, int BLOCK, int ITEMS, cub::BlockLoadAlgorithm LOAD, cub::BlockStoreAlgorithm STORE>
__global__ void __launch_bounds__(BLOCK) scale_copy(const T* in, T* out, float alpha, int n) {
    using Load = cub::BlockLoad<T, BLOCK, ITEMS, LOAD>;
    using Store = cub::BlockStore<T, BLOCK, ITEMS, STORE>;
    __shared__ union {
        typename Load::TempStorage load;
        typename Store::TempStorage store;
    } storage;
    T items[ITEMS];
    const int base = blockIdx.x * BLOCK * ITEMS;
    const int valid = n - base < BLOCK * ITEMS ? n - base : BLOCK * ITEMS;
    Load(storage.load).Load(in + base, items, valid, corpus::from_float<T>(0.0f));
    for (int i = 0; i < ITEMS; ++i) items[i] = corpus::from_float<T>(alpha * corpus::to_float(items[i]));
    __syncthreads();
    Store(storage.store).Store(out + base, items, valid);
}
"""

GEMM = r"""
// A CUTLASS-style tiled GEMM: C[M,N] = epilogue(A[M,K] * B[K,N] + bias[N]), row-major, the
// element type T in memory and in shared memory, fp32 accumulation. A block computes a BM x BN
// tile from BK-deep slices staged in shared memory; a thread a TM x TN fragment.
struct Bias {
    __device__ __forceinline__ float operator()(float x) const { return x; }
};
struct BiasRelu {
    __device__ __forceinline__ float operator()(float x) const { return x > 0.0f ? x : 0.0f; }
};
struct BiasGelu {  // the tanh approximation, as GPT-2's MLP uses
    __device__ __forceinline__ float operator()(float x) const {
        const float inner = 0.7978845608f * (x + 0.044715f * x * x * x);
        return 0.5f * x * (1.0f + tanhf(inner));
    }
};

template <class T, int BM, int BN, int BK, int TM, int TN, class Epilogue>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
gemm_bias_act(const T* __restrict__ a, const T* __restrict__ b, const T* __restrict__ bias,
              T* __restrict__ c, int m, int n, int k) {
    constexpr int kThreads = (BM / TM) * (BN / TN);
    __shared__ T a_tile[BK][BM + 1];  // transposed, padded against bank conflicts
    __shared__ T b_tile[BK][BN];
    const int row0 = blockIdx.y * BM;
    const int col0 = blockIdx.x * BN;
    const int ty = threadIdx.x / (BN / TN);
    const int tx = threadIdx.x % (BN / TN);
    float acc[TM][TN] = {};
    for (int k0 = 0; k0 < k; k0 += BK) {
        for (int i = threadIdx.x; i < BM * BK; i += kThreads) {
            const int r = i / BK, kk = i % BK;
            const bool in = row0 + r < m && k0 + kk < k;
            a_tile[kk][r] = in ? a[(row0 + r) * k + k0 + kk] : corpus::from_float<T>(0.0f);
        }
        for (int i = threadIdx.x; i < BK * BN; i += kThreads) {
            const int kk = i / BN, col = i % BN;
            const bool in = k0 + kk < k && col0 + col < n;
            b_tile[kk][col] = in ? b[(k0 + kk) * n + col0 + col] : corpus::from_float<T>(0.0f);
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            float af[TM], bf[TN];
#pragma unroll
            for (int i = 0; i < TM; ++i) af[i] = corpus::to_float(a_tile[kk][ty * TM + i]);
#pragma unroll
            for (int j = 0; j < TN; ++j) bf[j] = corpus::to_float(b_tile[kk][tx * TN + j]);
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += af[i] * bf[j];
        }
        __syncthreads();
    }
    const Epilogue epilogue;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = row0 + ty * TM + i;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int col = col0 + tx * TN + j;
            if (row < m && col < n) {
                c[row * n + col] = corpus::from_float<T>(epilogue(acc[i][j] + corpus::to_float(bias[col])));
            }
        }
    }
}
"""

SOFTMAX = r"""
// A row softmax: one block per row of `cols`, max and sum by warp shuffles, then across warps in
// shared memory; fp32 inside.
__device__ __forceinline__ float negative_infinity() { return __int_as_float(0xff800000); }

template <int BLOCK>
__device__ __forceinline__ float block_all_reduce(float v, bool is_max, float* scratch) {
    for (int offset = 16; offset > 0; offset /= 2) {
        const float other = __shfl_xor_sync(0xffffffffu, v, offset);
        v = is_max ? fmaxf(v, other) : v + other;
    }
    if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
    __syncthreads();
    v = is_max ? negative_infinity() : 0.0f;
    for (int w = 0; w < BLOCK / 32; ++w) v = is_max ? fmaxf(v, scratch[w]) : v + scratch[w];
    __syncthreads();
    return v;
}

template <class T, int BLOCK>
__global__ void __launch_bounds__(BLOCK) softmax_rows(const T* in, T* out, int cols) {
    __shared__ float scratch[BLOCK / 32];
    const T* row = in + static_cast<long long>(blockIdx.x) * cols;
    T* row_out = out + static_cast<long long>(blockIdx.x) * cols;
    float best = negative_infinity();
    for (int i = threadIdx.x; i < cols; i += BLOCK) best = fmaxf(best, corpus::to_float(row[i]));
    best = block_all_reduce<BLOCK>(best, true, scratch);
    float sum = 0.0f;
    for (int i = threadIdx.x; i < cols; i += BLOCK) sum += __expf(corpus::to_float(row[i]) - best);
    sum = block_all_reduce<BLOCK>(sum, false, scratch);
    const float scale = 1.0f / sum;
    for (int i = threadIdx.x; i < cols; i += BLOCK) {
        row_out[i] = corpus::from_float<T>(__expf(corpus::to_float(row[i]) - best) * scale);
    }
}
"""

LAYERNORM = r"""#include <cub/block/block_reduce.cuh>

// A layer norm over each row of `cols`: mean and variance by cub::BlockReduce in fp32, then
// out = (x - mean) * rstd * gamma + beta.
template <class T, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
layernorm_rows(const T* in, const T* gamma, const T* beta, T* out, int cols, float eps) {
    using Reduce = cub::BlockReduce<float, BLOCK>;
    __shared__ typename Reduce::TempStorage storage;
    __shared__ float mean_rstd[2];
    const T* row = in + static_cast<long long>(blockIdx.x) * cols;
    T* row_out = out + static_cast<long long>(blockIdx.x) * cols;
    float sum = 0.0f;
    for (int i = threadIdx.x; i < cols; i += BLOCK) sum += corpus::to_float(row[i]);
    sum = Reduce(storage).Sum(sum);
    if (threadIdx.x == 0) mean_rstd[0] = sum / cols;
    __syncthreads();
    const float mean = mean_rstd[0];
    float squares = 0.0f;
    for (int i = threadIdx.x; i < cols; i += BLOCK) {
        const float d = corpus::to_float(row[i]) - mean;
        squares += d * d;
    }
    squares = Reduce(storage).Sum(squares);
    if (threadIdx.x == 0) mean_rstd[1] = rsqrtf(squares / cols + eps);
    __syncthreads();
    const float rstd = mean_rstd[1];
    for (int i = threadIdx.x; i < cols; i += BLOCK) {
        const float y = (corpus::to_float(row[i]) - mean) * rstd * corpus::to_float(gamma[i]) +
                        corpus::to_float(beta[i]);
        row_out[i] = corpus::from_float<T>(y);
    }
}
"""

RMSNORM = r"""#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>

namespace cg = cooperative_groups;

// An RMS norm over each row of `cols`: the sum of squares by cooperative groups (cg::reduce over
// warp tiles, then across warps), out = x * rsqrt(mean(x^2) + eps) * weight.
template <class T, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
rmsnorm_rows(const T* in, const T* weight, T* out, int cols, float eps) {
    __shared__ float partial[BLOCK / 32];
    const cg::thread_block block = cg::this_thread_block();
    const cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    const T* row = in + static_cast<long long>(blockIdx.x) * cols;
    T* row_out = out + static_cast<long long>(blockIdx.x) * cols;
    float squares = 0.0f;
    for (int i = threadIdx.x; i < cols; i += BLOCK) {
        const float x = corpus::to_float(row[i]);
        squares += x * x;
    }
    squares = cg::reduce(warp, squares, cg::plus<float>());
    if (warp.thread_rank() == 0) partial[warp.meta_group_rank()] = squares;
    block.sync();
    float total = 0.0f;
    for (int w = 0; w < BLOCK / 32; ++w) total += partial[w];
    const float scale = rsqrtf(total / cols + eps);
    for (int i = threadIdx.x; i < cols; i += BLOCK) {
        row_out[i] = corpus::from_float<T>(corpus::to_float(row[i]) * scale *
                                           corpus::to_float(weight[i]));
    }
}
"""

HALF, BF16 = "__half", "__nv_bfloat16"


def kernel(expression, family, type_, block, per_block, grid):
    return {"expression": expression, "family": family, "type": type_, "block": block,
            "per_block": per_block, "grid": grid}


def cub_kernels():
    tile_grid = "ceil(n / per_block) blocks"
    reduce = [kernel(f"block_reduce_sum<{t}, {b}, {i}>", "block_reduce_sum", t, b, b * i, tile_grid)
              for t, b, i in [("float", 128, 4), ("float", 256, 4), ("float", 512, 2),
                              (HALF, 256, 4), (BF16, 256, 4), ("int", 128, 4), ("int", 256, 4)]]
    reduce += [kernel(f"block_reduce_max<{t}, {b}, {i}>", "block_reduce_max", t, b, b * i,
                      tile_grid)
               for t, b, i in [("float", 256, 4), (HALF, 128, 8)]]
    scan = [kernel(f"block_inclusive_scan<{t}, {b}, {i}>", "block_inclusive_scan", t, b, b * i,
                   tile_grid)
            for t, b, i in [("float", 128, 4), ("float", 256, 4), ("int", 256, 4), ("int", 512, 2)]]
    scan += [kernel(f"block_exclusive_scan<{t}, {b}, {i}>", "block_exclusive_scan", t, b, b * i,
                    tile_grid)
             for t, b, i in [("int", 128, 4), ("int", 256, 8)]]
    sort = [kernel(f"block_radix_sort_keys<{t}, {b}, {i}>", "block_radix_sort_keys", t, b, b * i,
                   tile_grid)
            for t, b, i in [("int", 128, 4), ("int", 256, 4), ("float", 128, 8), ("unsigned", 256, 8)]]
    sort += [kernel(f"block_radix_sort_pairs<{k}, {v}, {b}, {i}>", "block_radix_sort_pairs", k, b,
                    b * i, tile_grid)
             for k, v, b, i in [("float", "int", 256, 4), ("int", "int", 128, 4)]]
    warp = [kernel(f"warp_reduce_sum<{t}, {b}>", "warp_reduce_sum", t, b, b, "n / block blocks")
            for t, b in [("float", 128), ("float", 256), (HALF, 256), (BF16, 256), ("int", 128)]]
    copy = [kernel(f"scale_copy<{t}, {b}, {i}, cub::BLOCK_LOAD_{l}, cub::BLOCK_STORE_{s}>",
                   "scale_copy", t, b, b * i, tile_grid)
            for t, b, i, l, s in [("float", 128, 4, "DIRECT", "DIRECT"),
                                  ("float", 256, 4, "VECTORIZE", "VECTORIZE"),
                                  ("float", 256, 4, "TRANSPOSE", "TRANSPOSE"),
                                  (HALF, 256, 8, "WARP_TRANSPOSE", "WARP_TRANSPOSE"),
                                  (BF16, 128, 8, "VECTORIZE", "DIRECT"),
                                  ("int", 256, 4, "WARP_TRANSPOSE", "WARP_TRANSPOSE")]]
    return [("cub_block_reduce", BLOCK_REDUCE, reduce), ("cub_block_scan", BLOCK_SCAN, scan),
            ("cub_block_radix_sort", BLOCK_RADIX_SORT, sort),
            ("cub_warp_reduce", WARP_REDUCE, warp), ("cub_block_load_store", BLOCK_LOAD_STORE, copy)]


def gemm_kernels(type_):
    tiles = [(64, 64, 16, 4, 4, ["Bias", "BiasRelu", "BiasGelu"]),
             (128, 128, 32, 8, 8, ["Bias", "BiasRelu", "BiasGelu"]),
             (128, 64, 32, 8, 4, ["BiasGelu"])]
    out = []
    for bm, bn, bk, tm, tn, epilogues in tiles:
        for epilogue in epilogues:
            out.append(kernel(f"gemm_bias_act<{type_}, {bm}, {bn}, {bk}, {tm}, {tn}, {epilogue}>",
                              "gemm_bias_act", type_, (bm // tm) * (bn // tn), f"{bm}x{bn}",
                              "(ceil(n / BN), ceil(m / BM)) blocks"))
    return out


def sources():
    """(file name, code, options, kernels) for every source of the corpus."""
    out = [(f"{name}.cu", PRELUDE + code, CUB_OPTIONS, kernels)
           for name, code, kernels in cub_kernels()]
    out.append(("gemm.cu", PRELUDE + GEMM, ["-std=c++17", "-I$CUDA_INCLUDE"],
                [k for type_ in ["float", HALF, BF16] for k in gemm_kernels(type_)]))
    out.append(("softmax.cu", PRELUDE + SOFTMAX, ["-std=c++17", "-I$CUDA_INCLUDE"],
                [kernel(f"softmax_rows<{t}, {b}>", "softmax_rows", t, b, 0, "one block per row")
                 for t, b in [("float", 128), ("float", 256), ("float", 1024), (HALF, 256),
                              (BF16, 256)]]))
    out.append(("layernorm.cu", PRELUDE + LAYERNORM, CUB_OPTIONS,
                [kernel(f"layernorm_rows<{t}, {b}>", "layernorm_rows", t, b, 0, "one block per row")
                 for t, b in [("float", 256), ("float", 512), (HALF, 256), (HALF, 1024),
                              (BF16, 256)]]))
    out.append(("rmsnorm_cg.cu", PRELUDE + RMSNORM, CUB_OPTIONS,
                [kernel(f"rmsnorm_rows<{t}, {b}>", "rmsnorm_rows", t, b, 0, "one block per row")
                 for t, b in [("float", 256), (HALF, 256), (BF16, 512)]]))
    return out


def build(out_dir, unpacked):
    manifest = {"arch": ARCH, "generator": "scripts/make-cuda-corpus.py",
                "include_placeholder": "$CUDA_INCLUDE", "sources": []}
    files = {}
    tsv = []
    for name, code, options, kernels in sources():
        path = f"sources/{name}"
        files[path] = code.encode()
        manifest["sources"].append({"file": path, "options": options, "kernels": kernels})
        for k in kernels:
            tsv.append("\t".join([path, k["expression"], k["family"], k["type"], str(k["block"]),
                                  str(k["per_block"]), " ".join(options)]))
    files["manifest.json"] = (json.dumps(manifest, indent=1) + "\n").encode()
    files["kernels.tsv"] = ("\n".join(tsv) + "\n").encode()
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w:xz") as tar:
        for path in sorted(files):
            info = tarfile.TarInfo(path)
            info.size = len(files[path])
            info.mtime = 0  # the same bytes on every run
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(files[path]))
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "cuda-corpus.tar.xz"), "wb") as f:
        f.write(archive.getvalue())
    if unpacked:
        for path, data in files.items():
            os.makedirs(os.path.dirname(os.path.join(unpacked, path)), exist_ok=True)
            with open(os.path.join(unpacked, path), "wb") as f:
                f.write(data)
    print(f"{len(tsv)} kernels in {len(manifest['sources'])} sources -> "
          f"{os.path.join(out_dir, 'cuda-corpus.tar.xz')} ({len(archive.getvalue())} bytes)")
    return manifest, files


def cuda_include():
    for variable in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(variable):
            return os.path.join(os.environ[variable], "include")
    return "/usr/local/cuda/include"


def check(kcache, manifest, files, jobs):
    """Every kernel through `kcache compile` for sm_90a, a process and a fresh cache each, `jobs`
    at a time."""
    root = tempfile.mkdtemp(prefix="cuda-corpus-")
    include = cuda_include()
    commands = []
    for source in manifest["sources"]:
        path = os.path.join(root, source["file"])
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(files[source["file"]])
        options = [o.replace("$CUDA_INCLUDE", include) for o in source["options"]]
        for k in source["kernels"]:
            command = [kcache, "-d", tempfile.mkdtemp(dir=root), "compile", "--arch", ARCH,
                       "-j", "1", "-e", k["expression"]]
            command += ["--option=" + option for option in options]
            commands.append((f"{source['file']}  {k['expression']}", command + [path]))

    def run(item):
        label, command = item
        started = time.time()
        done = subprocess.run(command, capture_output=True, text=True)
        return label, time.time() - started, done

    started = time.time()
    failures = 0
    total = 0.0
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
            for label, seconds, done in pool.map(run, commands):
                total += seconds
                failures += done.returncode != 0
                print(f"{'ok  ' if done.returncode == 0 else 'FAIL'} {seconds:6.2f} s  {label}",
                      flush=True)
                if done.returncode != 0:
                    print(done.stdout + done.stderr, file=sys.stderr)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"{len(commands) - failures} of {len(commands)} kernels compiled through kcache for "
          f"{ARCH}: {total:.1f} s summed over the kernels, {time.time() - started:.1f} s wall "
          f"with {jobs} at a time")
    return failures == 0


def compare(archive):
    """Member by member, so that another liblzma's bytes do not matter."""
    with tempfile.TemporaryDirectory() as out:
        _, files = build(out, None)
    with tarfile.open(archive, "r:xz") as tar:
        held = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    differ = sorted(set(held) ^ set(files) | {p for p in held.keys() & files.keys()
                                              if held[p] != files[p]})
    for path in differ:
        print(f"{archive}: {path} is not what {os.path.basename(__file__)} writes; run it with "
              f"--out {os.path.dirname(archive) or '.'}", file=sys.stderr)
    return 1 if differ else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "build/cuda-corpus"))
    parser.add_argument("--dir", help="also write the unpacked tree here")
    parser.add_argument("--check", metavar="KCACHE", help="compile every kernel with this kcache")
    parser.add_argument("--jobs", type=int, default=1, help="--check: kernels compiled at once")
    parser.add_argument("--compare", metavar="ARCHIVE",
                        help="exit 1 unless ARCHIVE holds what this script writes (the test that "
                             "the committed corpus is the generator's)")
    args = parser.parse_args()
    if args.compare:
        return compare(args.compare)
    manifest, files = build(args.out, args.dir)
    if args.check:
        return 0 if check(args.check, manifest, files, max(1, args.jobs)) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
