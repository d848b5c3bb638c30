// SPDX-License-Identifier: Apache-2.0
// The remote tier's benchmarks (issue 17), side by side in one run, each new node a new process:
// - warm start of the 64 distinct PTX kernels on a fresh node: from the local disk tier, from
//   Redis on loopback (empty disk), and compiling them (empty disk, no remote), one kernel after
//   another and all at once through a 16-thread warm_up; with a GPU each kernel is also
//   launched once, so the kernels that came from Redis really run; Redis read with busy-poll
//   (the default) and without; then the same with 64 kernels that take longer to compile;
// - one lookup's worst case with the server dead, stopped and trickling: every remote read over a
//   few seconds, timed, against the configured timeout and the breaker's period.
// A redis-server is started here (tests/testing's harness); without one, or without nvJitLink,
// the program says why and exits 1.
#include "store/remote/remote_tier.hpp"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench.hpp"
#include "bench/child_process.hpp"
#include "driver/compiler_api.hpp"
#include "driver/device_memory.hpp"
#include "kcache/kernel_cache.hpp"
#include "store/remote/remote_config.hpp"
#include "testing/fake_driver.hpp"
#include "testing/redis_server.hpp"

namespace kcache::bench {
namespace {

using namespace std::chrono_literals;

struct Node {
    double total_ms = 0;   // 64 kernels ready (handles in hand)
    double launch_ms = 0;  // then one launch of each and a synchronize (GPU only)
    std::uint64_t compiles = 0, disk_hits = 0, remote_hits = 0, disk_writes = 0;
    double compile_ms = 0;  // the compiles' own time, summed over threads
};

std::optional<Node> node(const std::string& mode, const std::string& directory,
                         const std::string& url) {
    // A fresh node has no driver cache either: the CUDA ComputeCache, which nvJitLink also
    // consults where a driver is installed, would otherwise turn a second node's compiles into
    // cache hits.
    auto out = run_self({"--remote-child", mode, directory, url.empty() ? "-" : url},
                        {{"CUDA_CACHE_DISABLE", "1"}});
    Node run;
    unsigned long long compiles = 0, disk = 0, remote = 0, writes = 0;
    if (!out ||
        std::sscanf(out->c_str(), "%lf %lf %llu %llu %llu %llu %lf", &run.total_ms, &run.launch_ms,
                    &compiles, &disk, &remote, &writes, &run.compile_ms) != 7) {
        return std::nullopt;
    }
    run.compiles = compiles;
    run.disk_hits = disk;
    run.remote_hits = remote;
    run.disk_writes = writes;
    return run;
}

// The kernels a node asks for: the 64 softmax kernels, or (`fma:STEPS` after the mode) 64
// distinct kernels of STEPS rounds of FMAs, whose compile takes longer the more steps.
struct NodeKernels {
    std::vector<std::string> ptx;
    std::string name;
};

NodeKernels kernels_for(const std::string& mode) {
    const std::size_t colon = mode.find(":fma=");
    if (colon == std::string::npos) return {ptx_kernel_set(), "softmax_rows"};
    const int steps = std::atoi(mode.c_str() + colon + 5);
    NodeKernels kernels{{}, "large_kernel"};
    for (int i = 0; i < 64; ++i) kernels.ptx.push_back(fma_chain_ptx_kernel(steps, i));
    return kernels;
}

}  // namespace

// A fresh node: "one" asks for each kernel in turn, "all" warms all of them up on 16 threads.
int run_remote_child(const std::string& mode, const std::string& directory,
                     const std::string& url) {
    std::optional<driver::PrimaryContext> context;
    CacheOptions options;
    if (auto opened = driver::PrimaryContext::open(0); opened && opened->make_current()) {
        context.emplace(std::move(*opened));
    } else {
        options.driver = std::make_shared<fakes::FakeDriver>();
    }
    const NodeKernels kernels = kernels_for(mode);  // made before the clock starts
    std::vector<WarmUpItem> items = ptx_warm_up_items(kernels.ptx);
    for (auto& item : items) item.kernel_name = kernels.name;
    options.disk_directory = directory;
    if (url != "-") options.remote = url;
    // Each key's own entry, from the tier each mode names: what this bench compares (a cold
    // node's bundles, linked by wait_for_uploads below, would add writes and change the next
    // node's reads).
    options.bundle_warm_ups = false;
    const auto start = std::chrono::steady_clock::now();
    KernelCache cache(options);
    std::vector<KernelHandle> handles;
    if (mode.starts_with("one")) {
        for (const auto& item : items) {
            auto kernel = cache.kernel(item.key, item.make_source, item.kernel_name);
            if (!kernel) return 4;
            handles.push_back(std::move(*kernel));
        }
    } else {
        for (auto& result : cache.warm_up(items, 16)) {
            if (!result) return 4;
            handles.push_back(std::move(*result));
        }
    }
    const double total_ms = ms_since(start);
    double launch_ms = 0;
    if (context) {
        const auto launches = std::chrono::steady_clock::now();
        const LaunchConfig config{{1, 1, 1}, {32, 1, 1}, 0, nullptr};
        const std::uint64_t out = 0, in = 0;
        const std::uint32_t rows = 0;  // every thread returns at once: no buffer is touched
        for (const auto& handle : handles) {
            if (!handle.launch_with(config, out, in, rows)) return 6;
        }
        if (!context->synchronize()) return 6;
        launch_ms = ms_since(launches);
    }
    cache.wait_for_uploads();
    const CacheStats stats = cache.stats();
    std::printf("%.4f %.4f %llu %llu %llu %llu %.3f\n", total_ms, launch_ms,
                static_cast<unsigned long long>(stats.compiles),
                static_cast<unsigned long long>(stats.disk_hits),
                static_cast<unsigned long long>(stats.remote_hits),
                static_cast<unsigned long long>(stats.disk_writes),
                static_cast<double>(stats.compile_ns) / 1e6);
    return 0;
}

namespace {

// The warm start of 64 kernels on fresh nodes, every mode in turns. `set` is "" for the softmax
// kernels or ":fma=STEPS"; `one_by_one` adds the modes that ask for one kernel after another.
std::string warm_start_table(const std::string& directory, const std::string& set,
                             const std::string& title, bool one_by_one, int rounds,
                             std::string& note) {
    auto server = fakes::RedisServer::start();
    if (!server) {
        note = server.error().message();
        return {};
    }
    // The fleet's Redis and a node's warm disk, filled by one node's compile.
    const std::string warm = directory + "/warm-disk";
    std::filesystem::remove_all(directory);
    if (!node("all" + set, warm, (*server)->url())) {
        note = "the first node could not fill the tiers";
        return {};
    }
    enum class From { kDisk, kRemote, kCompile };
    struct Mode {
        std::string label;
        std::string how;  // "one" or "all"
        From from;
        std::string attributes;  // of the remote setting
        std::size_t baseline;    // the row it is compared with
    };
    const std::string no_busy = "|busy-poll=0";
    std::vector<Mode> modes;
    if (one_by_one) {
        modes.push_back({"disk tier (warm disk)", "one", From::kDisk, "", 0});
        modes.push_back({"remote tier (empty disk, Redis)", "one", From::kRemote, "", 0});
        modes.push_back({"remote tier, busy-poll=0", "one", From::kRemote, no_busy, 0});
        modes.push_back({"compile (empty disk, no remote)", "one", From::kCompile, "", 0});
    }
    const std::size_t all = modes.size();
    modes.push_back({"disk tier, warm_up x16", "all", From::kDisk, "", all});
    modes.push_back({"remote tier, warm_up x16", "all", From::kRemote, "", all});
    modes.push_back({"remote tier, busy-poll=0, warm_up x16", "all", From::kRemote, no_busy, all});
    modes.push_back({"compile, warm_up x16 (cold warm-up)", "all", From::kCompile, "", all});
    std::vector<std::vector<double>> totals(modes.size()), launches(modes.size()),
        compile_ms(modes.size());
    for (int round = 0; round < rounds; ++round) {
        for (std::size_t m = 0; m < modes.size(); ++m) {  // in turns: no mode runs warmer
            const Mode& mode = modes[m];
            const bool warm_disk = mode.from == From::kDisk;
            const std::string dir =
                warm_disk ? warm
                          : directory + "/fresh-" + std::to_string(round) + "-" + std::to_string(m);
            auto run = node(mode.how + set, dir,
                            mode.from == From::kRemote ? (*server)->url() + mode.attributes : "");
            // A compile must be nvJitLink's, stored on the disk: not the driver's JIT (and its
            // own cache), which the tiers would not hold.
            const bool as_expected =
                run &&
                (mode.from == From::kCompile
                     ? run->compiles == 64 && run->disk_writes == 64
                     : run->compiles == 0 &&
                           (mode.from == From::kRemote ? run->remote_hits : run->disk_hits) == 64);
            if (!as_expected) {
                note = "a node failed or did not find what it should: " + mode.label;
                return {};
            }
            totals[m].push_back(run->total_ms);
            launches[m].push_back(run->launch_ms);
            compile_ms[m].push_back(run->compile_ms);
        }
    }
    char line[320];
    std::string table = "## " + title + ", a new process per run, median of " +
                        std::to_string(rounds) +
                        " rounds in turns\n\n"
                        "| mode | ms to 64 handles | per kernel | vs disk | then 64 launches ms | "
                        "compiling, summed over threads, ms |\n"
                        "|---|---|---|---|---|---|\n";
    for (std::size_t m = 0; m < modes.size(); ++m) {
        const double total = median(totals[m]);
        const double disk = median(totals[modes[m].baseline]);
        std::snprintf(line, sizeof line, "| %s | %.3f | %.4f | %.2fx | %.3f | %.1f |\n",
                      modes[m].label.c_str(), total, total / 64, total / disk, median(launches[m]),
                      median(compile_ms[m]));
        table += line;
    }
    const auto ratio = [&](std::size_t a, std::size_t b) {
        return median(totals[a]) / median(totals[b]);
    };
    if (one_by_one) {
        std::snprintf(
            line, sizeof line,
            "\nremote / disk, one at a time: %.2fx (busy-poll=0: %.2fx); by warm_up: %.2fx "
            "(busy-poll=0: %.2fx) (target <= 2x)\n",
            ratio(1, 0), ratio(2, 0), ratio(all + 1, all), ratio(all + 2, all));
        table += line;
    } else {
        std::snprintf(line, sizeof line, "\nremote / disk by warm_up: %.2fx (busy-poll=0: %.2fx)\n",
                      ratio(all + 1, all), ratio(all + 2, all));
        table += line;
    }
    std::snprintf(line, sizeof line,
                  "cold warm-up / remote warm_up: %.1fx (busy-poll=0: %.1fx) (target >= 20x)\n",
                  ratio(all + 3, all + 1), ratio(all + 3, all + 2));
    table += line;
    return table;
}

// Every remote read of `seconds`, one every `spacing`, against a server in some bad state.
struct Worst {
    double max_ms = 0;
    int reads = 0;
    int slow = 0;  // reads that took over half the timeout: those that waited on the server
};

Worst worst_case(const std::string& url, std::chrono::milliseconds seconds_total,
                 std::chrono::milliseconds spacing) {
    Worst worst;
    auto backends = store::remote::parse_remote_setting(url);
    if (!backends) return worst;
    store::remote::RemoteOptions options;
    options.backends = std::move(*backends);
    options.exit_grace = 0ms;
    auto tier = store::remote::RemoteTier::open(std::move(options));
    if (!tier) return worst;
    const auto end = std::chrono::steady_clock::now() + seconds_total;
    std::uint64_t n = 1;
    while (std::chrono::steady_clock::now() < end) {
        const auto start = std::chrono::steady_clock::now();
        (void)(*tier)->get(util::Fingerprint{n, n});
        ++n;
        const double ms = ms_since(start);
        worst.max_ms = std::max(worst.max_ms, ms);
        ++worst.reads;
        if (ms > 125) ++worst.slow;
        std::this_thread::sleep_for(spacing);
    }
    return worst;
}

std::string worst_case_table(std::string& note) {
    constexpr auto kSpan = 4000ms;
    constexpr auto kSpacing = 20ms;
    const std::string attributes = "|timeout=250ms|connect-timeout=250ms";
    std::string table =
        "\n## One remote read's worst case, timeout 250 ms, breaker back-off 1 s doubling to 30 "
        "s: a read every 20 ms for 4 s\n\n"
        "| server | reads | reads over 125 ms | slowest ms |\n|---|---|---|---|\n";
    char line[256];
    auto row = [&](const char* label, const Worst& worst) {
        std::snprintf(line, sizeof line, "| %s | %d | %d | %.1f |\n", label, worst.reads,
                      worst.slow, worst.max_ms);
        table += line;
    };
    {
        auto server = fakes::RedisServer::start();
        if (!server) {
            note = server.error().message();
            return {};
        }
        row("healthy", worst_case((*server)->url() + attributes, kSpan, kSpacing));
        const std::string url = (*server)->url();
        (*server)->stop();
        row("stopped (SIGSTOP)", worst_case(url + attributes, kSpan, kSpacing));
        (*server)->resume();
        (*server)->kill();
        row("dead (connection refused)", worst_case(url + attributes, kSpan, kSpacing));
    }
    {
        fakes::TricklingServer trickling("$20\r\n01234567890123456789\r\n", 100ms);
        row("trickling (a byte per 100 ms)",
            worst_case(trickling.url() + attributes, kSpan, kSpacing));
    }
    {
        fakes::BlackholeListener blackhole;
        if (blackhole.ready()) {
            row("blackholed (connect never completes)",
                worst_case(blackhole.url() + attributes, kSpan, kSpacing));
        }
    }
    table +=
        "\nA bad server may cost one read its timeout once per back-off period (1 s, then 2 "
        "s, 4 s...), never every read.\n";
    return table;
}

}  // namespace

constexpr int kHeavierSteps = 16;

std::string run_remote_tier(const std::string& directory, int rounds, std::string& note) {
    if (!driver::nvjitlink_api()) {
        note = "no nvJitLink: " + driver::nvjitlink_api().error().message();
        return {};
    }
    if (!fakes::RedisServer::available()) {
        note = fakes::RedisServer::unavailable_reason();
        return {};
    }
    std::string table = warm_start_table(
        directory, "", "A fresh node's warm start: 64 distinct PTX kernels", true, rounds, note);
    if (table.empty()) return {};
    // Kernels that take longer to compile: the remote tier's gain grows with the compile it saves.
    std::string heavier =
        warm_start_table(directory, ":fma=" + std::to_string(kHeavierSteps),
                         "The same with 64 heavier kernels (" + std::to_string(kHeavierSteps) +
                             " rounds of 64 FMAs each)",
                         false, rounds, note);
    if (heavier.empty()) return {};
    table += "\n" + heavier;
    std::string worst = worst_case_table(note);
    if (worst.empty()) return {};
    return table + worst;
}

}  // namespace kcache::bench
