// SPDX-License-Identifier: Apache-2.0
// Issue 19: kcache on a corpus of real generated kernels (a directory of PTX files, such as the
// Triton corpus's kernels/). Cold: the driver's JIT against nvJitLink alone, kcache one kernel at
// a time and warm_up on 16 threads, each in a new process with the driver's ComputeCache off
// (nvJitLink consults it too). Warm: new processes against the floor and the warm ComputeCache, the
// table of run_ptx_new_process_set. A CUDA C++ corpus (scripts/make-cuda-corpus.py, its
// kernels.tsv) has no driver JIT to compare with: kcache one by one against warm_up, cold and in
// warm new processes, then a sample checked on the GPU. Every kernel must load through kcache, or
// the run fails.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <thread>

#include "bench/bench.hpp"
#include "bench/child_process.hpp"
#include "compile/compiler.hpp"
#include "driver/cuda_api.hpp"
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

// Kernel i's name and key, for the slowest kernel's row.
std::string named(const KernelSet& set, int i) {
    return i >= 0 ? set.name(i) + " (" + set.key(i) + ")" : "";
}

// What a cold run's kernels cost one by one: their sum, the slowest, the compile times.
void append_cold_detail(std::string& text, const KernelSet& set, const ColdRun& one,
                        const ColdRun& all) {
    append(text,
           "| kcache cold, one by one: each kernel timed alone | ms |\n"
           "|---|---:|\n"
           "| sum of the kernels' times | %.1f |\n"
           "| slowest kernel (a warm_up's critical path): %s | %.1f |\n"
           "| compile time from stats (compile_ns), one by one | %.1f |\n"
           "| compile time from stats (compile_ns), warm_up: summed over its threads | %.1f |\n"
           "| warm_up's bound on %u threads: max(slowest, sum / %u) | %.1f |\n\n",
           one.sum_ms, named(set, one.max_index).c_str(), one.max_ms, one.compile_ms,
           all.compile_ms, kWarmUpThreads, kWarmUpThreads,
           std::max(one.max_ms, one.sum_ms / static_cast<double>(kWarmUpThreads)));
}

void append_loaded(std::string& text, const char* what, const ColdRun& run, int count,
                   std::string& note) {
    append(text, "- kcache cold, %s: %d of %d loaded (%d compiled)\n", what, run.loaded, count,
           run.compiles);
    if (run.loaded != count && note.empty()) {
        note = std::string("kcache cold, ") + what + ": " + std::to_string(count - run.loaded) +
               " of " + std::to_string(count) + " kernels did not load";
    }
}

// A CUDA C++ corpus: no driver JIT to compare with (the driver cannot compile CUDA C++), so
// kcache one by one against its warm_up, cold; then warm new processes from the disk tier the
// cold warm_up filled; then a sample launched against a CPU reference.
std::string run_cuda_corpus(const KernelSet& set, const std::string& device,
                            const std::string& corpus, const std::string& directory, int rounds,
                            std::string& note) {
    const int count = set.count();
    rounds = std::max(rounds, 1);
    std::filesystem::create_directories(directory + "/warm");
    auto one = cold_child("one", corpus, directory + "/cold-one");
    auto all = cold_child("warm-up", corpus, directory + "/cold-warm-up");
    // The last cold run fills the disk tier that the warm children read.
    auto workers = cold_child("warm-up-workers", corpus, directory + "/warm/kcache");
    if (!one || !all || !workers) {
        note = "a kcache cold child failed";
        return {};
    }
    std::string text;
    append(text,
           "Device: %s. %d CUDA C++ kernels from %s (NVRTC, one name expression each, "
           "sm_XXa).\n\n",
           device.c_str(), count, corpus.c_str());
    append_loaded(text, "one by one", *one, count, note);
    append_loaded(text, "warm_up", *all, count, note);
    append_loaded(text, "warm_up with compile workers", *workers, count, note);
    append(text,
           "\n| %d kernels, cold, each side a new process | total ms | per kernel ms | one by one "
           "/ this |\n"
           "|---|---:|---:|---:|\n"
           "| kcache, kernel() for one after another, 1 thread (NVRTC + nvJitLink + store + "
           "load) | %.1f | %.2f | 1.0x |\n"
           "| kcache warm_up, %u threads | %.1f | %.2f | %.2fx |\n"
           "| kcache warm_up, %u threads, compile_workers %u (NVRTC and nvJitLink in worker "
           "processes) | %.1f | %.2f | %.2fx |\n\n",
           count, one->total_ms, one->total_ms / count, kWarmUpThreads, all->total_ms,
           all->total_ms / count, one->total_ms / all->total_ms, kWarmUpThreads, kWarmUpThreads,
           workers->total_ms, workers->total_ms / count, one->total_ms / workers->total_ms);
    append_cold_detail(text, set, *one, *all);

    // Warm: rounds of new processes, each mode once a round, the order turning.
    const std::vector<std::string> modes = {"kcache", "kcache-warm-up"};
    std::vector<std::vector<double>> total(modes.size());
    std::vector<double> first;
    for (int round = 0; round < rounds; ++round) {
        for (std::size_t m = 0; m < modes.size(); ++m) {
            const std::size_t at = (m + static_cast<std::size_t>(round)) % modes.size();
            auto run = run_ptx_child(modes[at], directory + "/warm", corpus);
            if (!run) {
                note = "a warm " + modes[at] + " child failed (not all from the disk tier?)";
                return {};
            }
            total[at].push_back(run->total_ms);
            if (at == 0) first.push_back(run->first_ms);  // a warm_up has no first kernel
        }
    }
    // No floor here: the PTX sets' floor loads cubins compiled from their PTX; these have none.
    append(text,
           "| %d kernels, warm, a new process each (median of %d) | all loaded ms | per kernel "
           "ms |\n|---|---:|---:|\n"
           "| kcache, one by one, from the disk tier (first kernel: %.3f ms) | %.2f | %.3f |\n"
           "| kcache warm_up, 16 threads, from the disk tier | %.2f | %.3f |\n",
           count, rounds, median(first), median(total[0]), median(total[0]) / count,
           median(total[1]), median(total[1]) / count);
    append(text, "- kcache warm, every child: %d of %d loaded from the disk tier\n\n", count,
           count);
    std::string checked = check_cuda_corpus(corpus, directory + "/check", note);
    std::filesystem::remove_all(directory);
    if (checked.empty()) return {};
    return text + checked;
}

// Each of `count` kernels through `load` (false: not loaded, and it said why on standard error),
// one after another, each timed alone: their sum, the slowest, the whole.
template <class Load>
ColdRun one_after_another(int count, Load load) {
    ColdRun run;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < count; ++i) {
        const auto kernel_start = std::chrono::steady_clock::now();
        const bool loaded = load(i);
        const double ms = ms_since(kernel_start);
        if (!loaded) continue;
        ++run.loaded;
        run.sum_ms += ms;
        if (ms > run.max_ms) {
            run.max_ms = ms;
            run.max_index = i;
        }
    }
    run.total_ms = ms_since(start);
    return run;
}

// The "nvjitlink" child: no kcache, only nvJitLink and the driver's load of each cubin, one after
// another, as kcache's one by one would be without its own work (planning, names of their own,
// the disk tier). nvJitLink loads at the first link, as kcache's does.
std::optional<ColdRun> bare_nvjitlink_run(const KernelSet& set) {
    const auto& cu = driver::cuda_api();
    if (!cu) return std::nullopt;
    ColdRun run = one_after_another(set.count(), [&](int i) {
        const std::string& ptx = set.ptx[static_cast<std::size_t>(i)];
        auto compiled = compile::link_ptx(ptx, ptx_target(ptx));
        CUmodule module = nullptr;
        CUfunction function = nullptr;
        const bool loaded =
            compiled && (*cu)->cuModuleLoadData(&module, compiled->cubin.data()) == CUDA_SUCCESS &&
            (*cu)->cuModuleGetFunction(&function, module, set.name(i).c_str()) == CUDA_SUCCESS;
        if (!loaded) std::fprintf(stderr, "%s: not linked or loaded\n", set.key(i).c_str());
        return loaded;
    });
    run.compiles = run.loaded;
    return run;
}

void print_cold_run(const ColdRun& run) {
    std::printf("%.3f %.3f %.3f %d %d %d %.3f\n", run.total_ms, run.sum_ms, run.max_ms,
                run.max_index, run.loaded, run.compiles, run.compile_ms);
}

}  // namespace

std::string run_corpus_prebuild(const std::string& corpus, const std::string& directory, int arch,
                                int threads, std::string& note) {
    std::optional<KernelSet> read = kernel_set(corpus, note);
    if (!read) return {};
    const std::vector<WarmUpItem> items = read->warm_up_items();  // copies: three passes
    const int count = read->count();
    struct Pass {
        double total_ms = 0, max_ms = 0;
        int max_index = -1, done = 0, compiled = 0;
    };
    // Each item prebuilt once on `workers` threads (1: in order, each timed) into `folder`.
    auto pass = [&](const std::string& folder, int workers, bool fresh) {
        if (fresh) std::filesystem::remove_all(folder);
        CacheOptions options;
        options.disk_directory = folder;
        options.compile_workers = workers > 1 ? static_cast<std::size_t>(workers) : 0;
        KernelCache cache(options);
        Pass result;
        std::mutex guard;
        std::atomic<int> next{0};
        const auto start = std::chrono::steady_clock::now();
        auto work = [&] {
            for (int i = next++; i < count; i = next++) {
                const WarmUpItem& item = items[static_cast<std::size_t>(i)];
                const auto kernel_start = std::chrono::steady_clock::now();
                auto made = cache.prebuild(item.key, item.make_source, arch);
                const double ms = ms_since(kernel_start);
                const std::lock_guard lock(guard);
                if (!made) {
                    if (note.empty()) note = item.key + ": " + made.error().describe();
                    continue;
                }
                ++result.done;
                result.compiled += *made == Provenance::kCompiled ? 1 : 0;
                if (ms > result.max_ms) {
                    result.max_ms = ms;
                    result.max_index = i;
                }
            }
        };
        std::vector<std::thread> pool;
        for (int t = 1; t < workers; ++t) pool.emplace_back(work);
        work();
        for (auto& thread : pool) thread.join();
        result.total_ms = ms_since(start);
        return result;
    };
    const Pass one = pass(directory + "/one", 1, true);
    const Pass all = pass(directory + "/parallel", threads, true);
    const Pass warm = pass(directory + "/parallel", 1, false);
    std::filesystem::remove_all(directory);
    std::string text;
    append(
        text,
        "%d kernels from %s, prebuilt for arch %d (sm_%da where a source asks for it; no GPU), in "
        "one process\n\n"
        "| pass | prebuilt | compiled | total ms | per kernel ms | one by one / this |\n"
        "|---|---:|---:|---:|---:|---:|\n",
        count, corpus.c_str(), arch, arch);
    for (const auto& [what, run] :
         {std::pair{std::string("cold, one by one"), one},
          std::pair{"cold, " + std::to_string(threads) + " threads (compile workers)", all},
          std::pair{std::string("warm (the disk tier), one by one"), warm}}) {
        append(text, "| %s | %d | %d | %.1f | %.2f | %.2fx |\n", what.c_str(), run.done,
               run.compiled, run.total_ms, run.total_ms / count, one.total_ms / run.total_ms);
    }
    append(text, "\n- slowest kernel, cold one by one: %s, %.1f ms\n",
           one.max_index >= 0 ? items[static_cast<std::size_t>(one.max_index)].key.c_str() : "-",
           one.max_ms);
    if (one.done != count || all.done != count || warm.done != count) {
        if (note.empty()) note = "not every kernel was prebuilt";
    } else if (warm.compiled != 0) {
        note = "the warm pass compiled";
    }
    return text;
}

int run_corpus_cold_child(const std::string& mode, const std::string& corpus,
                          const std::string& directory) {
    auto context = driver::PrimaryContext::open(0);
    if (!context || !context->make_current()) return 3;
    std::optional<KernelSet> read = child_kernel_set(corpus);  // before any clock starts
    if (!read) return 4;
    KernelSet& set = *read;
    const int count = set.count();
    if (mode == "nvjitlink") {
        auto bare = bare_nvjitlink_run(set);
        if (!bare) return 3;
        print_cold_run(*bare);
        return 0;
    }
    CacheOptions options;
    options.disk_directory = directory;
    // Compile worker processes (a `kcache` beside this program), started by the warm-up itself:
    // their start is on the clock.
    if (mode == "warm-up-workers") options.compile_workers = kWarmUpThreads;
    KernelCache cache(options);
    ColdRun run;
    if (mode == "one") {
        run = one_after_another(count, [&](int i) {
            auto kernel = cache.kernel(set.key(i), set.handing_over(i), set.name(i));
            if (!kernel) std::fprintf(stderr, "%s\n", kernel.error().describe().c_str());
            return kernel.ok();
        });
    } else if (mode == "warm-up" || mode == "warm-up-workers") {
        const auto start = std::chrono::steady_clock::now();
        for (const auto& result : cache.warm_up(set.handed_over_items(), kWarmUpThreads)) {
            if (result) {
                ++run.loaded;
            } else {
                std::fprintf(stderr, "%s\n", result.error().describe().c_str());
            }
        }
        run.total_ms = ms_since(start);
    } else {
        return 2;
    }
    run.compiles = static_cast<int>(cache.stats().compiles);
    run.compile_ms = static_cast<double>(cache.stats().compile_ns) / 1e6;
    print_cold_run(run);
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
    if (!set.cuda.empty()) return run_cuda_corpus(set, device, corpus, directory, rounds, note);

    // Cold, each side a new process, which pays for loading its compiler library as a real first
    // run does; rounds of the four in turns (the driver first in the first round, so that nothing
    // it does could profit kcache), since one cold run on a shared host varies by tens of percent
    // (docs/performance.md). nvJitLink alone beside them says what of one at a time is kcache's.
    const int cold_rounds = std::max(rounds, 1) >= 3 ? 3 : 1;
    std::vector<double> jit_times;
    std::vector<ColdRun> bares, ones, alls;
    std::vector<double> bare_ratios, one_ratios, all_ratios, own_ratios;
    for (int round = 0; round < cold_rounds; ++round) {
        std::optional<ChildRun> jit;
        std::optional<ColdRun> bare, one, all;
        // A folder of its own for each child, all removed at the end: ext4 allocates inodes
        // slowly right after many were freed (it skips those deleted moments ago), which would
        // charge kcache's files for the previous round's clean-up.
        const auto folder = [&](const char* name) {
            return directory + "/" + name + "-" + std::to_string(round);
        };
        for (int k = 0; k < 4; ++k) {
            switch ((round + k) % 4) {
                case 0:
                    jit = run_ptx_child("compute", directory + "/jit", corpus, kCacheOff);
                    break;
                case 1:
                    bare = cold_child("nvjitlink", corpus, folder("cold-nvjitlink"));
                    break;
                case 2:
                    one = cold_child("one", corpus, folder("cold-one"));
                    break;
                default:
                    all = cold_child("warm-up", corpus, folder("cold-warm-up"));
                    break;
            }
        }
        if (!jit) {
            note = "the driver's JIT child failed (a kernel did not load?)";
            return {};
        }
        if (!bare || !one || !all) {
            note = "a cold child failed (nvJitLink alone, or kcache's)";
            return {};
        }
        // Paired within the round: the host's drift between rounds cancels.
        bare_ratios.push_back(jit->total_ms / bare->total_ms);
        one_ratios.push_back(jit->total_ms / one->total_ms);
        all_ratios.push_back(jit->total_ms / all->total_ms);
        own_ratios.push_back(one->total_ms / bare->total_ms);
        jit_times.push_back(jit->total_ms);
        bares.push_back(*bare);
        ones.push_back(*one);
        alls.push_back(*all);
    }
    // The round whose time is the median stands for its side in the detail below.
    auto median_run = [](std::vector<ColdRun> runs) {
        std::sort(runs.begin(), runs.end(),
                  [](const ColdRun& a, const ColdRun& b) { return a.total_ms < b.total_ms; });
        return runs[runs.size() / 2];
    };
    const ColdRun bare = median_run(bares);
    const ColdRun one = median_run(ones);
    const ColdRun all = median_run(alls);
    std::string text;
    append(text, "Device: %s. %d PTX kernels from %s.\n\n", device.c_str(), count, corpus.c_str());
    for (const ColdRun& run : bares) append_loaded(text, "nvJitLink alone", run, count, note);
    for (const ColdRun& run : ones) append_loaded(text, "one by one", run, count, note);
    for (const ColdRun& run : alls) append_loaded(text, "warm_up", run, count, note);
    const double jit_ms = median(jit_times);
    const auto ratios = [](const std::vector<double>& r) {
        char cell[64];
        std::snprintf(cell, sizeof cell, "%.2fx | %.2fx - %.2fx", median(r),
                      *std::min_element(r.begin(), r.end()), *std::max_element(r.begin(), r.end()));
        return std::string(cell);
    };
    append(text,
           "\n| %d kernels, cold, each side a new process, CUDA_CACHE_DISABLE=1 (%d rounds, the "
           "order turning) | total ms, median | per kernel ms | driver JIT / this, median of the "
           "rounds' ratios | the rounds' ratios, lowest - highest |\n"
           "|---|---:|---:|---:|---|\n"
           "| (a) driver JIT: cuModuleLoadData of the PTX + cuModuleGetFunction, 1 thread | %.1f "
           "| %.2f | 1.0x | |\n"
           "| (a2) nvJitLink alone, no kcache: link + cuModuleLoadData + cuModuleGetFunction, 1 "
           "thread | %.1f | %.2f | %s |\n"
           "| (b) kcache, kernel() for one after another, 1 thread (nvJitLink + store + load) | "
           "%.1f | %.2f | %s |\n"
           "| (c) kcache warm_up, %u threads | %.1f | %.2f | %s |\n\n"
           "- one at a time, kcache's own share: (b) / (a2), median of the rounds' ratios %s\n\n",
           count, cold_rounds, jit_ms, jit_ms / count, bare.total_ms, bare.total_ms / count,
           ratios(bare_ratios).c_str(), one.total_ms, one.total_ms / count,
           ratios(one_ratios).c_str(), kWarmUpThreads, all.total_ms, all.total_ms / count,
           ratios(all_ratios).c_str(), ratios(own_ratios).c_str());
    append_cold_detail(text, set, one, all);

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
