// SPDX-License-Identifier: Apache-2.0
// Benchmark programs for kcache: side-by-side comparisons in one run, printed as tables.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "compile/compiler.hpp"
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
    // A control sharing nothing between threads: each looks the same keys up in a map of its own
    // and takes and drops a count with as many locked instructions as kcache's lookup. What it
    // slows by at N threads is the host's (clocks, caches shared between cores), not contention.
    double private_ns = 0;
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
// No GPU: what a KernelHandle adds per launch over calling the driver's launch itself, over a
// driver whose launch does nothing (the fake driver's, but for its bookkeeping), on one thread.
std::vector<LaunchRow> run_launch_overhead_fake(int launches_per_block, int blocks,
                                                std::string& note);

// Needs a GPU. Cold warm-up of 64 PTX kernels (driver JIT vs kcache) and warm start from the
// disk tier in `directory` against the in-memory floor. Empty result and `note` on failure.
std::string run_warm_start(const std::string& directory, std::string& note);

// Needs a GPU: the example kernels' GPU time as kcache compiles them (nvJitLink) against the
// driver's JIT of the same PTX.
std::string run_kernel_speed(std::string& note);

// Needs a GPU: the driver's cost per module as one context holds `counts` modules (one cubin or
// one each, kernels looked up or not), and per unload by order or at the context's end; no kcache
// code timed.
std::string run_module_churn(const std::vector<int>& counts, std::string& note);

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

// What a child loads: the 64 small kernels, the one large kernel, a directory's PTX files, or a
// CUDA C++ corpus (cuda_corpus_set).
struct KernelSet {
    std::vector<std::string> ptx;    // read or made before any clock starts
    std::vector<Source> cuda;        // a CUDA C++ corpus: each kernel's source; ptx then empty
    std::vector<std::string> names;  // each module's one kernel (a name expression for CUDA C++)
    std::vector<std::string> keys;
    std::vector<bool> arch_specific;  // .target sm_XXa: the floor links for it too
    // Whether each takes softmax_rows's parameters, so that a launch over zero rows is safe; a
    // directory's kernels take arguments nobody here knows, and are loaded, not launched.
    bool launchable = true;

    int count() const { return static_cast<int>(names.size()); }
    const std::string& key(int i) const { return keys[static_cast<std::size_t>(i)]; }
    const std::string& name(int i) const { return names[static_cast<std::size_t>(i)]; }
    std::vector<WarmUpItem> warm_up_items() const {
        std::vector<WarmUpItem> items;
        items.reserve(names.size());
        for (int i = 0; i < count(); ++i) {
            if (!cuda.empty()) {
                const Source* source = &cuda[static_cast<std::size_t>(i)];
                items.push_back(
                    {key(i), [source]() -> Result<Source> { return *source; }, name(i)});
                continue;
            }
            const std::string* text = &ptx[static_cast<std::size_t>(i)];
            items.push_back(
                {key(i), [text]() -> Result<Source> { return Source::ptx(*text); }, name(i)});
        }
        return items;
    }
    // Kernel i's generator for a timed run, which asks for each kernel once: it hands over the
    // text it holds, as a generator that builds its PTX returns it. The ComputeCache's mode gives
    // the driver the same text without a copy, so a copy here would charge kcache alone for it
    // (for the large kernel, 535 KiB into fresh memory: 78 us of a new process in profile P5).
    // Asked for twice, it gives no bytes, which kcache refuses: the run fails rather than lie.
    std::function<Result<Source>()> handing_over(int i) {
        if (!cuda.empty()) {
            return [source = &cuda[static_cast<std::size_t>(i)]]() -> Result<Source> {
                return std::move(*source);
            };
        }
        return [text = &ptx[static_cast<std::size_t>(i)]]() -> Result<Source> {
            return Source::ptx(std::move(*text));
        };
    }
    std::vector<WarmUpItem> handed_over_items() {
        std::vector<WarmUpItem> items;
        items.reserve(names.size());
        for (int i = 0; i < count(); ++i) items.push_back({key(i), handing_over(i), name(i)});
        return items;
    }
};
// `spec` is "small" (the 64), "large" (one large kernel), a CUDA C++ corpus (a directory with
// kernels.tsv) or a directory of *.ptx files, each with one `.visible .entry NAME(`, in name
// order. nullopt and `note` when one cannot be read.
std::optional<KernelSet> kernel_set(const std::string& spec, std::string& note);

// One kernel of a CUDA C++ corpus (scripts/make-cuda-corpus.py), a line of its kernels.tsv.
struct CudaCorpusKernel {
    std::string file;        // below the corpus directory
    std::string expression;  // the name expression that instantiates it
    std::string family;      // the template: gemm_bias_act, softmax_rows, block_reduce_sum...
    std::string type;        // the element type (the key's, for pairs)
    int block = 0;           // threads per block
    std::string per_block;   // elements per block (CUB), BMxBN (GEMM), 0 (one row per block)
    std::vector<std::string> options;  // $CUDA_INCLUDE replaced
};
// The toolkit's include folder ($CUDA_HOME/include, else /usr/local/cuda/include).
std::string cuda_include_root();
// A CUDA C++ corpus's kernels; nullopt and `note` when it cannot be read.
std::optional<std::vector<CudaCorpusKernel>> read_cuda_corpus(const std::string& directory,
                                                              std::string& note);
// Each kernel its own Source (its file, its options, its one name expression), for sm_XXa.
std::optional<KernelSet> cuda_corpus_set(const std::string& directory, std::string& note);
bool is_cuda_corpus(const std::string& directory);
// Needs a GPU: a sample of a CUDA C++ corpus's kernels (GEMM, softmax, layer and RMS norm, CUB's
// reduce, scan, sort, load/store) launched on known inputs and compared with a CPU reference; one
// line per kernel. `note` receives the first mismatch or failure.
std::string check_cuda_corpus(const std::string& directory, const std::string& cache_directory,
                              std::string& note);
// The same in a child process, which says why on its standard error.
inline std::optional<KernelSet> child_kernel_set(const std::string& spec) {
    std::string note;
    std::optional<KernelSet> set = kernel_set(spec, note);
    if (!set) std::fprintf(stderr, "%s\n", note.c_str());
    return set;
}

// Opens (command "enable") or shuts ("disable") perf's sampling window when KCACHE_BENCH_PERF is
// "ctl,ack,event" (see profile_window.cpp); nothing without it.
void profile_window(const char* command);

// No GPU: kcache's own share of a warm start of the kernel set `spec` (see kernel_set) over the
// fake driver: a disk tier in `directory` filled by a warm-up (compiles real, bundles linked), then
// `rounds` rounds of new processes (--fake-warm-child), bundled and one module a key, in turns.
struct FakeWarmStart {
    int kernels = 0;
    // Medians: the cache's opening, its warm_up, and of that the time in the fake's loads
    double bundled_open_ms = 0, bundled_ms = 0, bundled_driver_ms = 0;
    double per_key_open_ms = 0, per_key_ms = 0, per_key_driver_ms = 0;
};
std::optional<FakeWarmStart> fake_warm_start(const std::string& spec, const std::string& directory,
                                             int workers, int rounds, std::string& note);
std::string format_fake_warm_start(const FakeWarmStart& run, int workers, int rounds);
std::string run_fake_warm_start(const std::string& spec, const std::string& directory, int workers,
                                int rounds, std::string& note);
// The child side: MODE "bundled" or "per-key"; prints "open_ms warm_up_ms driver_ms".
int run_fake_warm_child(const std::string& mode, const std::string& directory,
                        const std::string& spec, int workers);

// Needs a GPU: the warm start of those kernels in new processes, and of one large kernel, each in
// `rounds` rounds of one process per mode (kcache from its disk tier, the floor, the driver's
// ComputeCache, and more for scale), in `directory`.
std::string run_ptx_new_process(const std::string& directory, int rounds, std::string& note);
// Needs a GPU: the same table for the kernel set `spec` (see kernel_set) alone; for a directory,
// kcache (one by one and warm_up), the floor and the ComputeCache.
std::string run_ptx_new_process_set(const std::string& directory, const std::string& spec,
                                    int rounds, std::string& note);
// The child side: prints its times (see ChildRun) for MODE (kcache, floor, compute, ...), on the
// kernel set `spec`.
int run_ptx_warm_child(const std::string& mode, const std::string& directory,
                       const std::string& spec);

// What a --ptx-warm-child printed, in ms but for faults.
struct ChildRun {
    double context_ms = 0;
    double total_ms = 0;   // every kernel loaded
    double open_ms = 0;    // kcache: the cache's opening, within total_ms
    double first_ms = 0;   // kcache and the floors: the first kernel, within total_ms
    double launch_ms = 0;  // then the first launch of each, and a synchronize
    double faults = 0;     // minor page faults while the kernels loaded (getrusage)
    double driver_ms = 0;  // within total_ms: inside cuModuleLoadData + cuModuleGetFunction
};
// Runs --ptx-warm-child MODE DIRECTORY SPEC in a new process with `environment` added.
std::optional<ChildRun> run_ptx_child(
    const std::string& mode, const std::string& directory, const std::string& spec,
    const std::vector<std::pair<std::string, std::string>>& environment = {});
// The driver's ComputeCache on, in a folder of its own below `directory`.
std::vector<std::pair<std::string, std::string>> compute_cache_env(const std::string& directory);

inline double ms_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
        .count();
}

// printf onto the end of `out`.
__attribute__((format(printf, 2, 3))) inline void append(std::string& out, const char* format,
                                                         ...) {
    char line[1024];
    va_list args;
    va_start(args, format);
    std::vsnprintf(line, sizeof line, format, args);
    va_end(args);
    out += line;
}

// Issue 19: a directory of PTX kernels (the Triton corpus's kernels/) cold, the driver's JIT
// against kcache one by one and warm_up, each in a new process with the ComputeCache off; and
// warm in new processes (run_ptx_new_process_set). Needs a GPU; works below `directory`.
std::string run_corpus(const std::string& corpus, const std::string& directory, int rounds,
                       std::string& note);
// No GPU needed: the corpus (a kernel_set spec) prebuilt for `arch` in one process, one by one and
// on `threads` threads into fresh disk tiers, then again from the disk tier; works below
// `directory`. `note` receives the first failure.
std::string run_corpus_prebuild(const std::string& corpus, const std::string& directory, int arch,
                                int threads, std::string& note);
// The child side of the cold runs: MODE "one" (kernel() for each, each timed) or "warm-up"
// (16 threads), on an empty disk tier in `directory`; prints "total_ms sum_ms max_ms max_index
// loaded compiles compile_ms".
int run_corpus_cold_child(const std::string& mode, const std::string& corpus,
                          const std::string& directory);

// Issue 19, no GPU needed: a directory of PTX through nvJitLink one after another, on `workers`
// threads and in `workers` processes; what the compile order costs on `workers`; and a durable
// store against an unsynced one. Works below `directory`.
std::string run_compile_scaling(const std::string& corpus, const std::string& directory,
                                int workers, std::string& note);
// The target a PTX module names (".target sm_90a": arch 90, arch-specific).
compile::Target ptx_target(const std::string& ptx);
// Issue 19, on a GPU: a directory of PTX through the driver's JIT (cuModuleLoadData), the
// driver's linker to a cubin (cuLink*) and nvJitLink, one after another and on `workers` threads
// of one process, side by side; the medians of `rounds`.
std::string run_driver_jit(const std::string& corpus, int workers, int rounds, std::string& note);
// Issue 19: the memory and scale curve, below `directory` (see bench/scale.cpp). No GPU needed:
// without one the kernels load into the fake driver. A cap of 0 leaves that part out.
struct ScaleOptions {
    int max_kernels = 10000;   // distinct kernels: 10, 100, 1,000, 10,000 up to this
    int max_entries = 100000;  // directory entries: 1,000, 10,000, 100,000 up to this
    int rounds = 3;            // warm children and CLI runs: the median of
    std::string kcache;        // the CLI whose scans are timed
};
std::string run_scale(const std::string& directory, const ScaleOptions& options, std::string& note);
// The child side: MODE "cold" (warm_up into an empty disk tier), "warm-up" or "one" (kernel()
// for each) of `count` kernels from the `first`; prints "total_ms cpu_ms rss_kib device_kib
// loaded compiles disk_hits".
int run_scale_child(const std::string& mode, const std::string& directory, int count, int first);
// Fills `directory` with `count` valid entries (distinct artifacts around one small cubin),
// those not there yet, through the entry format's encoder and the directory's atomic write.
int run_scale_fill(const std::string& directory, int count);

}  // namespace kcache::bench
