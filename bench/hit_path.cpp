// SPDX-License-Identifier: Apache-2.0
// Hit path: kcache's lock-free lookup against the seed model's global mutex, 1..N threads.
#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <string_view>
#include <thread>
#include <unordered_map>

#include "bench/bench.hpp"
#include "bench/seed_model.hpp"
#include "kcache/kernel_cache.hpp"
#include "ptx_kernels.hpp"

namespace kcache::bench {
namespace {

// Keys as the seed's callers write them; eight of them, looked up round robin.
const char* const kKeys[] = {"softmax:32",        "softmax:1000",       "softmax_long_row:1500",
                             "residual_add:1024", "residual_add:4096",  "gelu:16",
                             "gelu:4096",         "gemm_tiled:64x64x64"};
constexpr int kKeyCount = 8;

// Runs `body(thread_index, stop)` on `threads` threads for `ms` milliseconds; returns the mean
// nanoseconds per operation as one thread sees it.
template <class Body>
double measure(int threads, int ms, const std::function<void()>& setup, Body body) {
    std::atomic<bool> stop{false};
    std::vector<std::uint64_t> ops(static_cast<std::size_t>(threads));
    std::barrier start(threads + 1);
    std::vector<std::thread> pool;
    pool.reserve(static_cast<std::size_t>(threads));
    for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
            if (setup) setup();
            start.arrive_and_wait();
            ops[static_cast<std::size_t>(t)] = body(stop);
        });
    }
    start.arrive_and_wait();
    const auto begin = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    stop.store(true);
    for (auto& thread : pool) thread.join();
    const double elapsed =
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - begin).count();
    std::uint64_t total = 0;
    for (auto n : ops) total += n;
    return elapsed * threads / static_cast<double>(total);
}

}  // namespace

std::vector<HitPathRow> run_hit_path(const HitPathOptions& options) {
    const std::string ptx = examples::residual_add_ptx();
    CacheOptions cache_options;
    cache_options.driver = options.driver;
    KernelCache cache(cache_options);
    SeedModelCache seed(options.driver);
    if (options.thread_setup) options.thread_setup();
    // Warm both caches so that every measured lookup is a hit.
    for (const char* key : kKeys) {
        auto handle = cache.kernel(
            key, [&] { return Source::ptx(ptx); }, "residual_add");
        auto module = seed.get_or_compile(key, ptx);
        if (!handle || !module) {
            std::fprintf(stderr, "hit path warm-up failed: %s\n",
                         (!handle ? handle.error() : module.error()).describe().c_str());
            return {};
        }
    }

    auto kcache_loop = [&](std::atomic<bool>& stop) {
        std::uint64_t n = 0;
        while (!stop.load(std::memory_order_relaxed)) {
            auto h = cache.kernel(
                kKeys[n % kKeyCount], [&] { return Source::ptx(ptx); }, "residual_add");
            keep(h);
            ++n;
        }
        return n;
    };
    // The control: a private map of the same keys, and a reference taken and dropped with two
    // locked instructions, as kcache's lookup and its handle's release take them.
    auto private_loop = [&](std::atomic<bool>& stop) {
        std::unordered_map<std::string_view, std::uint64_t> own;
        for (int k = 0; k < kKeyCount; ++k) own.emplace(kKeys[k], static_cast<std::uint64_t>(k));
        std::atomic<std::uint64_t> count{0};
        std::uint64_t n = 0;
        while (!stop.load(std::memory_order_relaxed)) {
            const auto found = own.find(std::string_view(kKeys[n % kKeyCount]));
            count.fetch_add(1, std::memory_order_acq_rel);
            keep(found->second);
            count.fetch_sub(1, std::memory_order_acq_rel);
            ++n;
        }
        return n;
    };
    auto seed_loop = [&](std::atomic<bool>& stop) {
        std::uint64_t n = 0;
        while (!stop.load(std::memory_order_relaxed)) {
            auto m = seed.get_or_compile(kKeys[n % kKeyCount], ptx);
            keep(m);
            ++n;
        }
        return n;
    };
    // Warm-up, untimed: the first timed configuration must not pay for cold caches and clock
    // ramp-up, or every later ratio against it would flatter kcache.
    measure(1, options.milliseconds, options.thread_setup, seed_loop);
    measure(1, options.milliseconds, options.thread_setup, kcache_loop);

    std::vector<HitPathRow> rows;
    for (int threads : options.threads) {
        std::vector<double> seed_runs, kcache_runs, private_runs;
        for (int r = 0; r < options.repeats; ++r) {
            seed_runs.push_back(
                measure(threads, options.milliseconds, options.thread_setup, seed_loop));
            kcache_runs.push_back(
                measure(threads, options.milliseconds, options.thread_setup, kcache_loop));
            private_runs.push_back(
                measure(threads, options.milliseconds, options.thread_setup, private_loop));
        }
        rows.push_back({threads, median(seed_runs), median(kcache_runs), median(private_runs)});
    }
    return rows;
}

std::string format_hit_path(const std::vector<HitPathRow>& rows) {
    if (rows.empty()) return "hit path: no result\n";
    std::string out =
        "| threads | seed model ns/lookup | kcache ns/lookup | seed / kcache | kcache vs its "
        "1-thread | control sharing nothing, ns/lookup | control vs its 1-thread |\n"
        "|---:|---:|---:|---:|---:|---:|---:|\n";
    const double one = rows.front().kcache_ns;
    const double private_one = rows.front().private_ns;
    for (const auto& row : rows) {
        char line[240];
        std::snprintf(line, sizeof line, "| %d | %.1f | %.1f | %.1fx | %.2fx | %.1f | %.2fx |\n",
                      row.threads, row.seed_ns, row.kcache_ns, row.seed_ns / row.kcache_ns,
                      row.kcache_ns / one, row.private_ns, row.private_ns / private_one);
        out += line;
    }
    return out;
}

}  // namespace kcache::bench
