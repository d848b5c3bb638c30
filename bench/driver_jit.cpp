// SPDX-License-Identifier: Apache-2.0
// Issue 19: could the driver's own JIT be kcache's PTX compiler? kcache compiles PTX with
// nvJitLink, whose compiles ran 3-8% slower than the driver's JIT of the same PTX one at a time.
// The driver compiles PTX to a cubin too, through cuLinkCreate / cuLinkAddData / cuLinkComplete
// in a context. This puts the three side by side on one corpus, in one process: the driver's JIT
// as an application gets it (cuModuleLoadData of the PTX), the driver's linker to a cubin (then
// its load), and nvJitLink (then its load); one after another, and on N threads largest first.
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <thread>

#include "bench/bench.hpp"
#include "bench/open_gpu.hpp"
#include "compile/compiler.hpp"

namespace kcache::bench {
namespace {

// The driver's linker, which kcache's driver table leaves out: looked up here for this measure.
struct DriverLinker {
    decltype(&::cuLinkCreate) create = nullptr;
    decltype(&::cuLinkAddData) add_data = nullptr;
    decltype(&::cuLinkComplete) complete = nullptr;
    decltype(&::cuLinkDestroy) destroy = nullptr;
};

#define KCACHE_LINKER_SYMBOL(name) KCACHE_LINKER_TEXT(name)
#define KCACHE_LINKER_TEXT(name) #name

std::optional<DriverLinker> driver_linker(std::string& note) {
    void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (handle == nullptr) {
        note = "libcuda.so.1 is not loaded";
        return std::nullopt;
    }
    DriverLinker linker;
    linker.create = reinterpret_cast<decltype(linker.create)>(
        dlsym(handle, KCACHE_LINKER_SYMBOL(cuLinkCreate)));
    linker.add_data = reinterpret_cast<decltype(linker.add_data)>(
        dlsym(handle, KCACHE_LINKER_SYMBOL(cuLinkAddData)));
    linker.complete = reinterpret_cast<decltype(linker.complete)>(
        dlsym(handle, KCACHE_LINKER_SYMBOL(cuLinkComplete)));
    linker.destroy = reinterpret_cast<decltype(linker.destroy)>(
        dlsym(handle, KCACHE_LINKER_SYMBOL(cuLinkDestroy)));
    if (!linker.create || !linker.add_data || !linker.complete || !linker.destroy) {
        note = "libcuda.so.1 lacks the cuLink functions";
        return std::nullopt;
    }
    return linker;
}

// One kernel's way from PTX to a loaded module, in the context current on the calling thread.
// Returns the milliseconds to the cubin (`compile_ms`) and to the loaded module (the total), or a
// negative total on failure.
struct Timed {
    double compile_ms = 0;
    double total_ms = -1;
    std::size_t cubin_bytes = 0;
};

struct Ways {
    const driver::CudaApi& cu;
    DriverLinker linker;

    Timed load(CUmodule& module, const void* image) const {
        const auto start = std::chrono::steady_clock::now();
        Timed timed;
        if (cu.cuModuleLoadData(&module, image) != CUDA_SUCCESS) return timed;
        timed.total_ms = ms_since(start);
        return timed;
    }

    // The driver's JIT as an application meets it: cuModuleLoadData of the PTX.
    Timed module_of_ptx(const std::string& ptx) const {
        CUmodule module = nullptr;
        Timed timed = load(module, ptx.c_str());
        timed.compile_ms = timed.total_ms;
        if (module != nullptr) cu.cuModuleUnload(module);
        return timed;
    }

    // The driver's linker to a cubin, then the cubin's load.
    Timed driver_linked(const std::string& ptx) const {
        Timed timed;
        const auto start = std::chrono::steady_clock::now();
        CUlinkState state = nullptr;
        if (linker.create(0, nullptr, nullptr, &state) != CUDA_SUCCESS) return timed;
        void* cubin = nullptr;
        std::size_t size = 0;
        const bool linked =
            linker.add_data(state, CU_JIT_INPUT_PTX, const_cast<char*>(ptx.c_str()), ptx.size() + 1,
                            "kernel.ptx", 0, nullptr, nullptr) == CUDA_SUCCESS &&
            linker.complete(state, &cubin, &size) == CUDA_SUCCESS;
        timed.compile_ms = ms_since(start);
        CUmodule module = nullptr;
        // The cubin lives until the state is destroyed: loaded first.
        const bool loaded = linked && cu.cuModuleLoadData(&module, cubin) == CUDA_SUCCESS;
        linker.destroy(state);
        if (!loaded) return timed;
        timed.total_ms = ms_since(start);
        timed.cubin_bytes = size;
        cu.cuModuleUnload(module);
        return timed;
    }

    // nvJitLink to a cubin, as kcache compiles PTX, then the cubin's load.
    Timed nvjitlink_linked(const std::string& ptx) const {
        Timed timed;
        const auto start = std::chrono::steady_clock::now();
        auto compiled = compile::link_ptx(ptx, ptx_target(ptx));
        timed.compile_ms = ms_since(start);
        if (!compiled) return timed;
        CUmodule module = nullptr;
        if (cu.cuModuleLoadData(&module, compiled->cubin.data()) != CUDA_SUCCESS) return timed;
        timed.total_ms = ms_since(start);
        timed.cubin_bytes = compiled->cubin.size();
        cu.cuModuleUnload(module);
        return timed;
    }
};

using Way = std::function<Timed(const std::string&)>;

struct Run {
    double wall_ms = 0;
    double compile_sum_ms = 0;  // the compiles' own times, added
    double total_sum_ms = 0;    // compile and load, added
    double slowest_ms = 0;      // the slowest kernel's compile and load
    std::size_t cubin_bytes = 0;
    int failed = 0;
};

// `order` on `threads` threads taking kernels from one counter, `context` current on each.
Run run_way(const Way& way, const KernelSet& set, const std::vector<std::size_t>& order,
            int threads, const driver::CudaApi& cu, CUcontext context) {
    std::vector<Timed> timed(order.size());
    std::atomic<std::size_t> next{0};
    auto work = [&] {
        cu.cuCtxSetCurrent(context);
        for (std::size_t n = next.fetch_add(1); n < order.size(); n = next.fetch_add(1)) {
            timed[n] = way(set.ptx[order[n]]);
        }
    };
    const auto start = std::chrono::steady_clock::now();
    if (threads == 1) {
        work();
    } else {
        std::vector<std::thread> pool;
        pool.reserve(static_cast<std::size_t>(threads));
        for (int t = 0; t < threads; ++t) pool.emplace_back(work);
        for (auto& thread : pool) thread.join();
    }
    Run run;
    run.wall_ms = ms_since(start);
    for (const Timed& one : timed) {
        if (one.total_ms < 0) {
            ++run.failed;
            continue;
        }
        run.compile_sum_ms += one.compile_ms;
        run.total_sum_ms += one.total_ms;
        run.slowest_ms = std::max(run.slowest_ms, one.total_ms);
        run.cubin_bytes += one.cubin_bytes;
    }
    return run;
}

}  // namespace

std::string run_driver_jit(const std::string& corpus, int workers, int rounds, std::string& note) {
    // Before cuInit: every compile a compile, none a hit in the driver's ComputeCache.
    setenv("CUDA_CACHE_DISABLE", "1", 1);
    std::optional<KernelSet> read = kernel_set(corpus, note);
    if (!read) return {};
    const KernelSet& set = *read;
    if (set.ptx.empty()) {
        note = "no PTX kernels in " + corpus;
        return {};
    }
    auto gpu = open_gpu(note);
    if (!gpu) return {};
    auto linker = driver_linker(note);
    if (!linker) return {};
    CUcontext context = nullptr;
    gpu->cu.cuCtxGetCurrent(&context);
    const Ways ways{gpu->cu, *linker};

    std::vector<std::size_t> corpus_order(set.ptx.size());
    std::iota(corpus_order.begin(), corpus_order.end(), 0);
    std::vector<std::size_t> largest_first = corpus_order;  // warm_up's order
    std::stable_sort(largest_first.begin(), largest_first.end(),
                     [&](auto a, auto b) { return set.ptx[a].size() > set.ptx[b].size(); });

    struct Row {
        const char* what;
        Way way;
        int threads;
        std::vector<Run> runs;
    };
    std::vector<Row> rows = {
        {"driver's JIT: cuModuleLoadData of the PTX",
         [&](const std::string& ptx) { return ways.module_of_ptx(ptx); },
         1,
         {}},
        {"driver's linker to a cubin (cuLink*), then its load",
         [&](const std::string& ptx) { return ways.driver_linked(ptx); },
         1,
         {}},
        {"nvJitLink to a cubin (kcache's compiler), then its load",
         [&](const std::string& ptx) { return ways.nvjitlink_linked(ptx); },
         1,
         {}},
        {"driver's JIT: cuModuleLoadData of the PTX",
         [&](const std::string& ptx) { return ways.module_of_ptx(ptx); },
         workers,
         {}},
        {"driver's linker to a cubin (cuLink*), then its load",
         [&](const std::string& ptx) { return ways.driver_linked(ptx); },
         workers,
         {}},
        {"nvJitLink to a cubin (kcache's compiler), then its load",
         [&](const std::string& ptx) { return ways.nvjitlink_linked(ptx); },
         workers,
         {}},
    };
    // Each way once before any clock: the libraries' first use out of the rows.
    for (const Row& row : rows) {
        if (row.way(set.ptx[largest_first.back()]).total_ms < 0) {
            note = std::string(row.what) + " failed on kernel " + set.keys[largest_first.back()];
            return {};
        }
    }
    // Rounds turn the order of the rows, so that none is always first after an idle machine.
    for (int round = 0; round < rounds; ++round) {
        for (std::size_t r = 0; r < rows.size(); ++r) {
            Row& row = rows[(r + static_cast<std::size_t>(round)) % rows.size()];
            const auto& order = row.threads == 1 ? corpus_order : largest_first;
            row.runs.push_back(run_way(row.way, set, order, row.threads, gpu->cu, context));
            if (row.runs.back().failed > 0) {
                note = std::string(row.what) + ": " + std::to_string(row.runs.back().failed) +
                       " kernels failed";
                return {};
            }
        }
    }
    gpu->cu.cuCtxSetCurrent(context);

    const double base = median([&] {
        std::vector<double> walls;
        for (const Run& run : rows[0].runs) walls.push_back(run.wall_ms);
        return walls;
    }());
    std::string out;
    append(out,
           "%zu PTX kernels of %s, CUDA_CACHE_DISABLE=1, one process, one context; medians of %d "
           "rounds (the rows' order turning). Each way: the PTX to a loaded module (then "
           "unloaded); N threads take kernels largest first.\n\n",
           set.ptx.size(), corpus.c_str(), rounds);
    out +=
        "| way | threads | wall ms | compiles' own ms, summed | compile + load ms, summed | "
        "slowest kernel ms | cubin bytes, summed | driver's JIT on 1 thread / this wall |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|\n";
    for (const Row& row : rows) {
        std::vector<double> wall, compile, total, slowest;
        for (const Run& run : row.runs) {
            wall.push_back(run.wall_ms);
            compile.push_back(run.compile_sum_ms);
            total.push_back(run.total_sum_ms);
            slowest.push_back(run.slowest_ms);
        }
        const double wall_ms = median(wall);
        append(out, "| %s | %d | %.1f | %.1f | %.1f | %.1f | %zu | %.2fx |\n", row.what,
               row.threads, wall_ms, median(compile), median(total), median(slowest),
               row.runs.front().cubin_bytes, base / wall_ms);
    }
    return out;
}

}  // namespace kcache::bench
