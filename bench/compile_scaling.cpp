// SPDX-License-Identifier: Apache-2.0
// Issue 19: where a cold warm-up's time goes, without a GPU. A directory of PTX (the corpus)
// through nvJitLink: one after another (each kernel's own time), on N threads of one process, and
// in N processes (forked, sharing one counter), each in largest-first order; what the order costs
// on N workers, from the kernels' own times (corpus order against largest first); and what a
// durable store of the cubins costs against an unsynced one.
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <numeric>
#include <thread>

#include "bench/bench.hpp"
#include "compile/compiler.hpp"
#include "kcache/kernel_cache.hpp"
#include "testing/fake_driver.hpp"
#include "util/files.hpp"
#include "util/open_directory.hpp"

namespace kcache::bench {

compile::Target ptx_target(const std::string& ptx) {
    // ".target sm_90a": the exact target the generator wrote.
    compile::Target target;
    const std::size_t at = ptx.find(".target sm_");
    if (at == std::string::npos) return target;
    std::size_t end = at + 11;
    int arch = 0;
    while (end < ptx.size() && ptx[end] >= '0' && ptx[end] <= '9') {
        arch = arch * 10 + (ptx[end++] - '0');
    }
    if (arch > 0) target.arch = arch;
    target.arch_specific = end < ptx.size() && ptx[end] == 'a';
    return target;
}

namespace {

// Milliseconds of one compile, or a negative number if it failed.
double compile_one(const std::string& ptx) {
    const auto start = std::chrono::steady_clock::now();
    auto compiled = compile::link_ptx(ptx, ptx_target(ptx));
    return compiled ? ms_since(start) : -1.0;
}

// The makespan of list scheduling: each kernel, in `order`, to the worker that frees first.
double makespan(const std::vector<double>& ms, const std::vector<std::size_t>& order, int workers) {
    std::vector<double> free_at(static_cast<std::size_t>(workers), 0.0);
    for (const std::size_t i : order) {
        auto first = std::min_element(free_at.begin(), free_at.end());
        *first += ms[i];
    }
    return *std::max_element(free_at.begin(), free_at.end());
}

// What the kernel says a run cost, beside its wall time: the CPU in user space and in the kernel,
// the pages faulted in, and the switches away from a thread (it waited: a lock, a fault's I/O; or
// it was preempted). Threads that slow each other through the kernel's locks on their shared
// memory map show it as system time and waits that processes lack.
struct Usage {
    double user_ms = 0, system_ms = 0;
    long faults = 0, waits = 0, preempted = 0;
};

Usage usage_now(int who) {
    rusage now{};
    getrusage(who, &now);
    auto ms = [](const timeval& t) {
        return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_usec) / 1e3;
    };
    return {ms(now.ru_utime), ms(now.ru_stime), now.ru_minflt, now.ru_nvcsw, now.ru_nivcsw};
}

Usage operator-(const Usage& a, const Usage& b) {
    return {a.user_ms - b.user_ms, a.system_ms - b.system_ms, a.faults - b.faults,
            a.waits - b.waits, a.preempted - b.preempted};
}

struct Parallel {
    double wall_ms = 0;
    double sum_ms = 0;  // the compiles' own times, added
    int failed = 0;
    Usage usage;
};

Parallel on_threads(const KernelSet& set, const std::vector<std::size_t>& order, int threads) {
    std::atomic<std::size_t> next{0};
    std::vector<double> ms(order.size(), 0.0);
    const Usage before = usage_now(RUSAGE_SELF);
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    pool.reserve(static_cast<std::size_t>(threads));
    for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&] {
            for (std::size_t n = next.fetch_add(1); n < order.size(); n = next.fetch_add(1)) {
                ms[n] = compile_one(set.ptx[order[n]]);
            }
        });
    }
    for (auto& thread : pool) thread.join();
    Parallel run;
    run.wall_ms = ms_since(start);
    run.usage = usage_now(RUSAGE_SELF) - before;
    for (const double m : ms) {
        if (m < 0) ++run.failed;
        run.sum_ms += std::max(m, 0.0);
    }
    return run;
}

// N forked processes taking kernels from one counter in shared memory: nvJitLink with nothing of
// another compile in its process.
std::optional<Parallel> on_processes(const KernelSet& set, const std::vector<std::size_t>& order,
                                     int processes) {
    struct Shared {
        std::atomic<std::size_t> next;
        double ms[1];
    };
    const std::size_t bytes = sizeof(Shared) + sizeof(double) * order.size();
    void* mapped = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (mapped == MAP_FAILED) return std::nullopt;
    auto* shared = new (mapped) Shared{};
    shared->next.store(0);
    const Usage before = usage_now(RUSAGE_CHILDREN);
    const auto start = std::chrono::steady_clock::now();
    std::vector<pid_t> children;
    for (int p = 0; p < processes; ++p) {
        const pid_t pid = fork();
        if (pid == 0) {
            for (std::size_t n = shared->next.fetch_add(1); n < order.size();
                 n = shared->next.fetch_add(1)) {
                shared->ms[n] = compile_one(set.ptx[order[n]]);
            }
            _exit(0);
        }
        if (pid > 0) children.push_back(pid);
    }
    bool all_ok = static_cast<int>(children.size()) == processes;
    for (const pid_t pid : children) {
        int status = 0;
        all_ok = waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
                 all_ok;
    }
    Parallel run;
    run.wall_ms = ms_since(start);
    run.usage = usage_now(RUSAGE_CHILDREN) - before;  // the children, once waited for
    for (std::size_t n = 0; n < order.size(); ++n) {
        if (shared->ms[n] < 0) ++run.failed;
        run.sum_ms += std::max(shared->ms[n], 0.0);
    }
    munmap(mapped, bytes);
    if (!all_ok) return std::nullopt;
    return run;
}

// Milliseconds per entry of writing `entries` atomically into a fresh directory, left for
// run_compile_scaling to remove at its end: ext4 allocates inodes slowly right after many were
// freed (it skips those deleted moments ago), which would charge the next row for this one's
// clean-up.
double store_ms(const std::vector<std::string>& entries, const std::string& directory,
                util::Durability durability) {
    std::filesystem::remove_all(directory);
    std::filesystem::create_directories(directory);
    auto base = util::real_files().open_directory(directory);
    if (!base) return -1.0;
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < entries.size(); ++i) {
        // Built by appends: GCC 12's -Wrestrict misjudges "e" + std::string at some inlinings.
        std::string name = "e";
        name += std::to_string(i);
        name += ".kc";
        if (!util::real_files().write_atomic(*base, name, entries[i], durability)) {
            return -1.0;
        }
    }
    return ms_since(start) / static_cast<double>(entries.size());
}

// kcache on an empty disk tier over the fake driver: milliseconds of the whole run, and whether
// every kernel was compiled.
struct KcacheRun {
    double wall_ms = 0;
    double compile_ms = 0;  // stats().compile_ns: the compiles alone, summed over threads
    bool all_compiled = false;
};

// An empty `directory`: no disk tier, the cache in memory only.
KcacheRun kcache_cold(KernelSet set, const std::string& directory, int workers, bool warm_up) {
    if (!directory.empty()) std::filesystem::remove_all(directory);
    CacheOptions options;
    options.driver = std::make_shared<fakes::FakeDriver>();
    options.disk_directory = directory;
    KcacheRun run;
    {
        KernelCache cache(options);
        const auto start = std::chrono::steady_clock::now();
        bool all_ok = true;
        if (warm_up) {
            for (const auto& result :
                 cache.warm_up(set.handed_over_items(), static_cast<unsigned>(workers))) {
                all_ok = all_ok && result.ok();
            }
        } else {
            for (int i = 0; i < set.count(); ++i) {
                all_ok = cache.kernel(set.key(i), set.handing_over(i), set.name(i)).ok() && all_ok;
            }
        }
        run.wall_ms = ms_since(start);
        run.compile_ms = static_cast<double>(cache.stats().compile_ns) / 1e6;
        run.all_compiled =
            all_ok && cache.stats().compiles == static_cast<std::uint64_t>(set.count());
    }  // the queued disk writes end here, off the clock as they are off the caller's path
    return run;
}

}  // namespace

std::string run_compile_scaling(const std::string& corpus, const std::string& directory,
                                int workers, std::string& note) {
    // Where a driver is installed nvJitLink consults its ComputeCache: every compile after the
    // first of a kernel would be a hit there.
    setenv("CUDA_CACHE_DISABLE", "1", 1);
    // Every row's folder stays until the end (see store_ms), then goes, whatever the way out.
    struct RemovedAtTheEnd {
        const std::string& directory;
        ~RemovedAtTheEnd() {
            std::error_code ignored;
            std::filesystem::remove_all(directory, ignored);
        }
    } const removed_at_the_end{directory};
    std::optional<KernelSet> read = kernel_set(corpus, note);
    if (!read) return {};
    const KernelSet& set = *read;
    const std::size_t count = set.ptx.size();
    if (count == 0) {
        note = "no kernels in " + corpus;
        return {};
    }
    // One after another, in the corpus's order: each kernel's own time, and its cubin.
    std::vector<double> own(count, 0.0);
    std::vector<std::string> cubins;
    const Usage serial_before = usage_now(RUSAGE_SELF);
    const auto serial_start = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < count; ++i) {
        const auto start = std::chrono::steady_clock::now();
        auto compiled = compile::link_ptx(set.ptx[i], ptx_target(set.ptx[i]));
        own[i] = ms_since(start);
        if (!compiled) {
            note = "kernel " + set.keys[i] + " did not compile: " + compiled.error().message();
            return {};
        }
        cubins.push_back(std::move(compiled->cubin));
    }
    const double serial_ms = ms_since(serial_start);
    const Usage serial_usage = usage_now(RUSAGE_SELF) - serial_before;
    const double slowest = *std::max_element(own.begin(), own.end());
    const double own_sum = std::accumulate(own.begin(), own.end(), 0.0);

    std::vector<std::size_t> corpus_order(count);
    std::iota(corpus_order.begin(), corpus_order.end(), 0);
    // What warm_up does: largest source first, the size standing in for the compile's time.
    std::vector<std::size_t> largest_first = corpus_order;
    std::stable_sort(largest_first.begin(), largest_first.end(),
                     [&](auto a, auto b) { return set.ptx[a].size() > set.ptx[b].size(); });
    // Its best case: longest compile first, knowing the times.
    std::vector<std::size_t> longest_first = corpus_order;
    std::stable_sort(longest_first.begin(), longest_first.end(),
                     [&](auto a, auto b) { return own[a] > own[b]; });

    const Parallel threads = on_threads(set, largest_first, workers);
    const std::optional<Parallel> processes = on_processes(set, largest_first, workers);
    if (!processes || threads.failed > 0 || processes->failed > 0) {
        note = "a parallel compile failed";
        return {};
    }
    const KcacheRun one = kcache_cold(set, directory + "/one", workers, false);
    // What the disk tier adds to one after another: its lock files, its lookups, its writes
    // behind the caller.
    const KcacheRun one_in_memory = kcache_cold(set, "", workers, false);
    const KcacheRun all = kcache_cold(set, directory + "/warm-up", workers, true);
    const double synced = store_ms(cubins, directory + "/synced", util::Durability::kSynced);
    const double unsynced = store_ms(cubins, directory + "/unsynced", util::Durability::kUnsynced);
    // Last: it removes its folder at its end.
    constexpr int kWarmRounds = 5;
    const std::optional<FakeWarmStart> warm =
        fake_warm_start(corpus, directory + "/warm", workers, kWarmRounds, note);
    if (!one.all_compiled || !one_in_memory.all_compiled || !all.all_compiled) {
        note = "kcache did not compile every kernel";
        return {};
    }
    if (!warm) return {};

    std::string text;
    append(text,
           "%zu PTX kernels from %s through nvJitLink (no GPU involved), %d workers, %u "
           "hardware threads.\n\n",
           count, corpus.c_str(), workers, std::thread::hardware_concurrency());
    append(text,
           "| compiles | wall ms | compiles' own ms, summed | own / one after another's | "
           "one after another / this wall |\n|---|---:|---:|---:|---:|\n"
           "| one after another, 1 thread | %.1f | %.1f | 1.00x | 1.00x |\n"
           "| %d threads of one process, largest first | %.1f | %.1f | %.2fx | %.2fx |\n"
           "| %d processes, largest first | %.1f | %.1f | %.2fx | %.2fx |\n\n",
           serial_ms, own_sum, workers, threads.wall_ms, threads.sum_ms, threads.sum_ms / own_sum,
           serial_ms / threads.wall_ms, workers, processes->wall_ms, processes->sum_ms,
           processes->sum_ms / own_sum, serial_ms / processes->wall_ms);
    append(text,
           "| the same compiles, as the kernel counted them (getrusage) | CPU ms, user | CPU ms, "
           "system | minor faults | switches: waited | switches: preempted |\n"
           "|---|---:|---:|---:|---:|---:|\n");
    const auto usage_row = [&](const std::string& what, const Usage& u) {
        append(text, "| %s | %.1f | %.1f | %ld | %ld | %ld |\n", what.c_str(), u.user_ms,
               u.system_ms, u.faults, u.waits, u.preempted);
    };
    usage_row("one after another, 1 thread", serial_usage);
    usage_row(std::to_string(workers) + " threads of one process", threads.usage);
    usage_row(std::to_string(workers) + " processes", processes->usage);
    text += "\n";
    append(text,
           "| kcache over the fake driver, empty disk tier (compiles real, loads the fake's) | "
           "wall ms | / the compiles alone | its compiles (compile_ns), summed ms |\n"
           "|---|---:|---:|---:|\n"
           "| kernel() one after another | %.1f | %.2fx (of one after another) | %.1f |\n"
           "| the same, no disk tier (memory only) | %.1f | %.2fx (of one after another) | %.1f "
           "|\n"
           "| warm_up, %d threads | %.1f | %.2fx (of %d threads) | %.1f |\n\n",
           one.wall_ms, one.wall_ms / serial_ms, one.compile_ms, one_in_memory.wall_ms,
           one_in_memory.wall_ms / serial_ms, one_in_memory.compile_ms, workers, all.wall_ms,
           all.wall_ms / threads.wall_ms, workers, all.compile_ms);
    text += format_fake_warm_start(*warm, workers, kWarmRounds);
    const double bound = std::max(slowest, own_sum / workers);
    append(text,
           "| the order, on %d workers, from the kernels' own times (no contention) | makespan "
           "ms | / bound |\n|---|---:|---:|\n"
           "| bound: max(slowest kernel %.1f, sum / %d) | %.1f | 1.00x |\n"
           "| corpus order | %.1f | %.2fx |\n"
           "| largest PTX first (warm_up's order) | %.1f | %.2fx |\n"
           "| longest compile first (knowing the times) | %.1f | %.2fx |\n\n",
           workers, slowest, workers, bound, makespan(own, corpus_order, workers),
           makespan(own, corpus_order, workers) / bound, makespan(own, largest_first, workers),
           makespan(own, largest_first, workers) / bound, makespan(own, longest_first, workers),
           makespan(own, longest_first, workers) / bound);
    append(text,
           "| storing the %zu cubins, one after another | ms per entry |\n|---|---:|\n"
           "| durable (temporary file, fsync, rename), as the disk tier writes | %.3f |\n"
           "| unsynced | %.3f |\n",
           count, synced, unsynced);
    return text;
}

}  // namespace kcache::bench
