// SPDX-License-Identifier: Apache-2.0
// The remote tier's benchmarks (issue 17), side by side in one run, each new node a new process:
// - warm start of the 64 distinct PTX kernels on a fresh node: from the local disk tier, from
//   Redis on loopback (empty disk), and compiling them (empty disk, no remote), one kernel after
//   another and all at once through a 16-thread warm_up; with a GPU each kernel is also
//   launched once, so the kernels that came from Redis really run;
// - one lookup's worst case with the server dead, stopped and trickling: every remote read over a
//   few seconds, timed, against the configured timeout and the breaker's period.
// A redis-server is started here (tests/testing's harness); without one, or without nvJitLink,
// the program says why and exits 1.
#include "store/remote/remote_tier.hpp"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
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

double ms_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
        .count();
}

struct Node {
    double total_ms = 0;   // 64 kernels ready (handles in hand)
    double launch_ms = 0;  // then one launch of each and a synchronize (GPU only)
    std::uint64_t compiles = 0, disk_hits = 0, remote_hits = 0;
};

std::optional<Node> node(const std::string& mode, const std::string& directory,
                         const std::string& url) {
    auto out = run_self({"--remote-child", mode, directory, url.empty() ? "-" : url});
    Node run;
    unsigned long long compiles = 0, disk = 0, remote = 0;
    if (!out || std::sscanf(out->c_str(), "%lf %lf %llu %llu %llu", &run.total_ms, &run.launch_ms,
                            &compiles, &disk, &remote) != 5) {
        return std::nullopt;
    }
    run.compiles = compiles;
    run.disk_hits = disk;
    run.remote_hits = remote;
    return run;
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
    const std::vector<std::string> ptx = ptx_kernel_set();  // made before the clock starts
    const std::vector<WarmUpItem> items = ptx_warm_up_items(ptx);
    options.disk_directory = directory;
    if (url != "-") options.remote = url;
    const auto start = std::chrono::steady_clock::now();
    KernelCache cache(options);
    std::vector<KernelHandle> handles;
    if (mode == "one") {
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
    std::printf("%.4f %.4f %llu %llu %llu\n", total_ms, launch_ms,
                static_cast<unsigned long long>(stats.compiles),
                static_cast<unsigned long long>(stats.disk_hits),
                static_cast<unsigned long long>(stats.remote_hits));
    return 0;
}

namespace {

std::string warm_start_table(const std::string& directory, int rounds, std::string& note) {
    auto server = fakes::RedisServer::start();
    if (!server) {
        note = server.error().message();
        return {};
    }
    // The fleet's Redis and a node's warm disk, filled by one node's compile.
    const std::string warm = directory + "/warm-disk";
    std::filesystem::remove_all(directory);
    if (!node("all", warm, (*server)->url())) {
        note = "the first node could not fill the tiers";
        return {};
    }
    struct Mode {
        const char* label;
        const char* how;
        bool remote;
        bool warm_disk;
    };
    const Mode modes[] = {{"disk tier (warm disk)", "one", false, true},
                          {"remote tier (empty disk, Redis)", "one", true, false},
                          {"compile (empty disk, no remote)", "one", false, false},
                          {"disk tier, warm_up x16", "all", false, true},
                          {"remote tier, warm_up x16", "all", true, false},
                          {"compile, warm_up x16 (cold warm-up)", "all", false, false}};
    std::vector<std::vector<double>> totals(std::size(modes)), launches(std::size(modes));
    for (int round = 0; round < rounds; ++round) {
        for (std::size_t m = 0; m < std::size(modes); ++m) {  // in turns: no mode runs warmer
            const Mode& mode = modes[m];
            const std::string dir = mode.warm_disk ? warm
                                                   : directory + "/fresh-" + std::to_string(round) +
                                                         "-" + std::to_string(m);
            auto run = node(mode.how, dir, mode.remote ? (*server)->url() : "");
            const std::uint64_t expected_compiles = !mode.warm_disk && !mode.remote ? 64 : 0;
            if (!run || run->compiles != expected_compiles ||
                (mode.remote && run->remote_hits != 64) ||
                (mode.warm_disk && run->disk_hits != 64)) {
                note = std::string("a node failed or did not find what it should: ") + mode.label;
                return {};
            }
            totals[m].push_back(run->total_ms);
            launches[m].push_back(run->launch_ms);
        }
    }
    char line[256];
    std::string table =
        "## A fresh node's warm start: 64 distinct PTX kernels, a new process per "
        "run, median of " +
        std::to_string(rounds) +
        " rounds in turns\n\n"
        "| mode | ms to 64 handles | per kernel | vs disk | then 64 launches ms |\n"
        "|---|---|---|---|---|\n";
    for (std::size_t m = 0; m < std::size(modes); ++m) {
        const double total = median(totals[m]);
        const double disk = median(totals[m < 3 ? 0 : 3]);
        std::snprintf(line, sizeof line, "| %s | %.3f | %.4f | %.2fx | %.3f |\n", modes[m].label,
                      total, total / 64, total / disk, median(launches[m]));
        table += line;
    }
    std::snprintf(line, sizeof line,
                  "\nremote / disk: %.2fx one at a time, %.2fx by warm_up (target <= 2x); "
                  "cold warm-up / remote warm_up: %.1fx (target >= 20x)\n",
                  median(totals[1]) / median(totals[0]), median(totals[4]) / median(totals[3]),
                  median(totals[5]) / median(totals[4]));
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

std::string run_remote_tier(const std::string& directory, int rounds, std::string& note) {
    if (!driver::nvjitlink_api()) {
        note = "no nvJitLink: " + driver::nvjitlink_api().error().message();
        return {};
    }
    if (!fakes::RedisServer::available()) {
        note = fakes::RedisServer::unavailable_reason();
        return {};
    }
    std::string table = warm_start_table(directory, rounds, note);
    if (table.empty()) return {};
    std::string worst = worst_case_table(note);
    if (worst.empty()) return {};
    return table + worst;
}

}  // namespace kcache::bench
