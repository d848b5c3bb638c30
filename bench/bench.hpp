// SPDX-License-Identifier: Apache-2.0
// Benchmark programs for kcache: side-by-side comparisons in one run, printed as tables.
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "driver/driver.hpp"
#include "kcache/kernel_cache.hpp"

namespace kcache::bench {

inline double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    return values[values.size() / 2];
}

template <class T>
inline void keep(const T& value) {
    asm volatile("" : : "r"(&value) : "memory");
}

struct HitPathOptions {
    std::vector<int> threads = {1, 2, 4, 8, 16};
    int milliseconds = 300;  // per measurement
    int repeats = 3;         // median of
    std::shared_ptr<driver::Driver> driver;
    std::function<void()> thread_setup;  // e.g. make a CUDA context current
};

struct HitPathRow {
    int threads = 0;
    double seed_ns = 0;    // per lookup, as each thread sees it
    double kcache_ns = 0;  // per lookup returning a KernelHandle
};

std::vector<HitPathRow> run_hit_path(const HitPathOptions& options);
std::string format_hit_path(const std::vector<HitPathRow>& rows);

struct LaunchRow {
    std::string method;
    int threads = 0;
    double ns_per_launch = 0;
    double ratio = 0;  // against the row's baseline
    std::string baseline;
};

// Needs a GPU: empty-kernel launches, host time per launch. `note` receives failures.
std::vector<LaunchRow> run_launch_overhead(int launches_per_block, int blocks,
                                           const std::vector<int>& threads, std::string& note);
std::string format_launch(const std::vector<LaunchRow>& rows);

// Needs a GPU. Cold warm-up of 64 PTX kernels (driver JIT vs kcache) and warm start from the
// disk tier in `directory` against the in-memory floor. Empty result and `note` on failure.
std::string run_warm_start(const std::string& directory, std::string& note);

// Needs a GPU: the example kernels' GPU time as kcache compiles them (nvJitLink) against the
// driver's JIT of the same PTX.
std::string run_kernel_speed(std::string& note);

// No GPU needed: `light_count` and `heavy_count` distinct CUDA C++ kernels compiled by NVRTC on 1
// thread and on `threads` threads of this process.
std::string run_nvrtc_scaling(int arch, int light_count, int heavy_count, int threads,
                              std::string& note);
// Needs a GPU: a CUDA C++ kernel's readiness in new processes (this program, re-run with
// --cuda-warm-child) on a cold and a warm disk tier in `directory`, and a warm-up of
// `warm_up_count` distinct CUDA C++ kernels against compiling them one by one.
std::string run_cuda_warm_start(const std::string& directory, int warm_up_count, std::string& note);
// The child sides: print "context_ms first_ms second_ms compiles" for two CUDA C++ kernels from
// the cache in `directory`, or for two cubin files loaded without kcache (the floor).
int run_cuda_warm_child(const std::string& directory, bool heavy);
int run_cubin_floor_child(const std::string& first, const std::string& second, bool heavy);

// The remote tier (issue 17): a fresh node's warm start from Redis against its disk and against
// compiling, each node a new process (this program with --remote-child), and one remote read's
// worst case with the server stopped, dead, trickling and blackholed. Starts its own redis-server.
std::string run_remote_tier(const std::string& directory, int rounds, std::string& note);
// The child side: prints "total_ms launch_ms compiles disk_hits remote_hits".
int run_remote_child(const std::string& mode, const std::string& directory, const std::string& url);

// The 64 distinct PTX kernels of the issue-3 measurements, and the cache key of each.
std::vector<std::string> ptx_kernel_set();
std::string ptx_kernel_key(int i);
// A kernel of `steps` rounds of 64 dependent FMAs (named large_kernel, softmax_rows's parameters),
// its constants changed by `variant`: the compile time grows with `steps`.
std::string fma_chain_ptx_kernel(int steps, int variant);
// warm_up() items for `ptx` (which must outlive them): each by its ptx_kernel_key.
std::vector<WarmUpItem> ptx_warm_up_items(const std::vector<std::string>& ptx);
// Needs a GPU: the warm start of those kernels in new processes, and of one large kernel, each in
// `rounds` rounds of one process per mode (kcache from its disk tier, the floor, the driver's
// ComputeCache, and more for scale), in `directory`.
std::string run_ptx_new_process(const std::string& directory, int rounds, std::string& note);
// The child side: prints its times (see ChildRun) for MODE (kcache, floor, compute, ...), on the
// 64 small kernels or (`large`) on one large kernel.
int run_ptx_warm_child(const std::string& mode, const std::string& directory, bool large);

}  // namespace kcache::bench
