// SPDX-License-Identifier: Apache-2.0
// Issue 19: kcache on a corpus of real generated kernels (a directory of PTX files, such as the
// Triton corpus's kernels/). Cold: the driver's JIT against kcache one kernel at a time and
// warm_up on 16 threads, each in a new process with the driver's ComputeCache off (nvJitLink
// consults it too). Warm: new processes against the floor and the warm ComputeCache, the table
// of run_ptx_new_process_set. Every kernel must load through kcache, or the run fails.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "bench/bench.hpp"
#include "bench/child_process.hpp"
#include "driver/device_memory.hpp"
#include "kcache/kernel_cache.hpp"

namespace kcache::bench {
namespace {

constexpr unsigned kWarmUpThreads = 16;

// The driver off its ComputeCache: a cold JIT, and nvJitLink's own lookups in it skipped.
const std::vector<std::pair<std::string, std::string>> kCacheOff = {{"CUDA_CACHE_DISABLE", "1"}};

struct ColdRun {
    double total_ms = 0;
    double sum_ms = 0;  // "one": the kernels' own times, added
    double max_ms = 0;  // "one": the slowest kernel's, the critical path of a parallel warm-up
    int max_index = -1;
    int loaded = 0;
    int compiles = 0;
    double compile_ms = 0;  // stats().compile_ns, summed over threads
};

std::optional<ColdRun> cold_child(const std::string& mode, const std::string& corpus,
                                  const std::string& directory) {
    std::filesystem::remove_all(directory);
    auto out = run_self({"--corpus-cold-child", mode, corpus, directory}, kCacheOff);
    ColdRun run;
    if (!out || std::sscanf(out->c_str(), "%lf %lf %lf %d %d %d %lf", &run.total_ms, &run.sum_ms,
                            &run.max_ms, &run.max_index, &run.loaded, &run.compiles,
                            &run.compile_ms) != 7) {
        return std::nullopt;
    }
    return run;
}

}  // namespace

int run_corpus_cold_child(const std::string& mode, const std::string& corpus,
                          const std::string& directory) {
    auto context = driver::PrimaryContext::open(0);
    if (!context || !context->make_current()) return 3;
    std::optional<KernelSet> read = child_kernel_set(corpus);  // before any clock starts
    if (!read) return 4;
    KernelSet& set = *read;
    const int count = set.count();
    ColdRun run;
    CacheOptions options;
    options.disk_directory = directory;
    KernelCache cache(options);
    const auto start = std::chrono::steady_clock::now();
    if (mode == "one") {
        for (int i = 0; i < count; ++i) {
            const auto kernel_start = std::chrono::steady_clock::now();
            auto kernel = cache.kernel(set.key(i), set.handing_over(i), set.name(i));
            const double ms = ms_since(kernel_start);
            if (!kernel) {
                std::fprintf(stderr, "%s\n", kernel.error().describe().c_str());
                continue;
            }
            ++run.loaded;
            run.sum_ms += ms;
            if (ms > run.max_ms) {
                run.max_ms = ms;
                run.max_index = i;
            }
        }
    } else if (mode == "warm-up") {
        for (const auto& result : cache.warm_up(set.handed_over_items(), kWarmUpThreads)) {
            if (result) {
                ++run.loaded;
            } else {
                std::fprintf(stderr, "%s\n", result.error().describe().c_str());
            }
        }
    } else {
        return 2;
    }
    run.total_ms = ms_since(start);
    run.compiles = static_cast<int>(cache.stats().compiles);
    run.compile_ms = static_cast<double>(cache.stats().compile_ns) / 1e6;
    std::printf("%.3f %.3f %.3f %d %d %d %.3f\n", run.total_ms, run.sum_ms, run.max_ms,
                run.max_index, run.loaded, run.compiles, run.compile_ms);
    return 0;
}

std::string run_corpus(const std::string& corpus, const std::string& directory, int rounds,
                       std::string& note) {
    std::optional<KernelSet> read = kernel_set(corpus, note);
    if (!read) return {};
    const KernelSet& set = *read;
    const int count = set.count();
    // Like the other GPU modes: without a device, say so before any child starts.
    auto context = driver::PrimaryContext::open(0);
    if (!context) {
        note = context.error().message() + " (" + std::to_string(count) + " kernels read from " +
               corpus + ")";
        return {};
    }
    const std::string device = context->info().name;
    std::filesystem::remove_all(directory);
    std::filesystem::create_directories(directory);

    // Cold, the driver first so that nothing it does could profit kcache; each side a new
    // process, which pays for loading its compiler library as a real first run does.
    auto jit = run_ptx_child("compute", directory + "/jit", corpus, kCacheOff);
    if (!jit) {
        note = "the driver's JIT child failed (a kernel did not load?)";
        return {};
    }
    auto one = cold_child("one", corpus, directory + "/cold-one");
    auto all = cold_child("warm-up", corpus, directory + "/cold-warm-up");
    if (!one || !all) {
        note = "a kcache cold child failed";
        return {};
    }
    std::string text;
    append(text, "Device: %s. %d PTX kernels from %s.\n\n", device.c_str(), count, corpus.c_str());
    for (const auto& [what, run] : {std::pair{"one by one", *one}, std::pair{"warm_up", *all}}) {
        append(text, "- kcache cold, %s: %d of %d loaded (%d compiled)\n", what, run.loaded, count,
               run.compiles);
        if (run.loaded != count && note.empty()) {
            note = std::string("kcache cold, ") + what + ": " + std::to_string(count - run.loaded) +
                   " of " + std::to_string(count) + " kernels did not load";
        }
    }
    const double jit_ms = jit->total_ms;
    append(text,
           "\n| %d kernels, cold, each side a new process, CUDA_CACHE_DISABLE=1 | total ms | per "
           "kernel ms | driver JIT / this |\n"
           "|---|---:|---:|---:|\n"
           "| (a) driver JIT: cuModuleLoadData of the PTX + cuModuleGetFunction, 1 thread | %.1f "
           "| %.2f | 1.0x |\n"
           "| (b) kcache, kernel() for one after another, 1 thread (nvJitLink + store + load) | "
           "%.1f | %.2f | %.2fx |\n"
           "| (c) kcache warm_up, %u threads | %.1f | %.2f | %.2fx |\n\n",
           count, jit_ms, jit_ms / count, one->total_ms, one->total_ms / count,
           jit_ms / one->total_ms, kWarmUpThreads, all->total_ms, all->total_ms / count,
           jit_ms / all->total_ms);
    const std::string slowest =
        one->max_index >= 0 ? set.name(one->max_index) + " (" + set.key(one->max_index) + ")" : "";
    append(text,
           "| kcache cold, one by one: each kernel timed alone | ms |\n"
           "|---|---:|\n"
           "| sum of the kernels' times | %.1f |\n"
           "| slowest kernel (a warm_up's critical path): %s | %.1f |\n"
           "| compile time from stats (compile_ns), one by one | %.1f |\n"
           "| compile time from stats (compile_ns), warm_up: summed over its threads | %.1f |\n"
           "| warm_up's bound on %u threads: max(slowest, sum / %u) | %.1f |\n\n",
           one->sum_ms, slowest.c_str(), one->max_ms, one->compile_ms, all->compile_ms,
           kWarmUpThreads, kWarmUpThreads,
           std::max(one->max_ms, one->sum_ms / static_cast<double>(kWarmUpThreads)));

    // Warm: new processes, rounds in turns; the warm kcache mode fails unless all come from disk.
    std::string warm = run_ptx_new_process_set(directory + "/warm", corpus, rounds, note);
    if (warm.empty()) return {};
    // Reached only if every kcache child found all on disk (disk_hits = count, no compile).
    append(text, "- kcache warm, every child: %d of %d loaded from the disk tier\n\n", count,
           count);
    std::filesystem::remove_all(directory);
    return text + warm;
}

}  // namespace kcache::bench
