// SPDX-License-Identifier: Apache-2.0
// Issue 19: kcache's own share of a warm start, without a GPU. A disk tier is filled by a warm-up
// over the fake driver (compiles real, its bundles linked and stored); then new processes (this
// program with --fake-warm-child) each open a new cache on it and ask for every kernel at once,
// bundles loaded or one module a key, in turns. The fake's loads copy the cubins; the rest of the
// time is kcache's: generating and hashing the sources, reading and checking the entries,
// publishing the handles, in a process whose memory is as fresh as a real warm start's.
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "bench/bench.hpp"
#include "bench/child_process.hpp"
#include "kcache/kernel_cache.hpp"
#include "testing/fake_driver.hpp"

namespace kcache::bench {
namespace {

// The fake driver, with the time its loads and kernel lookups take summed (on every thread): what
// a warm start spends outside kcache's own code.
class TimedDriver final : public driver::Driver {
    template <class Call>
    auto timed(Call call) {
        const auto start = std::chrono::steady_clock::now();
        auto result = call();
        ns_.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now() - start)
                          .count());
        return result;
    }

public:
    double ms() const { return static_cast<double>(ns_.load()) / 1e6; }

    std::string describe() const override { return fake_.describe(); }
    Result<int> current_arch() override { return fake_.current_arch(); }
    int uniform_arch() const noexcept override { return fake_.uniform_arch(); }
    Result<driver::ModuleId> load_module(const Source& source) override {
        return timed([&] { return fake_.load_module(source); });
    }
    Result<driver::ModuleId> load_binary(driver::Image image, driver::ImageSource again) override {
        return timed([&] { return fake_.load_binary(std::move(image), std::move(again)); });
    }
    void unload_module(driver::ModuleId module) noexcept override { fake_.unload_module(module); }
    Result<driver::KernelId> get_kernel(driver::ModuleId module, const std::string& name) override {
        return timed([&] { return fake_.get_kernel(module, name); });
    }
    Result<std::vector<driver::KernelParam>> kernel_params(driver::KernelId kernel) override {
        return fake_.kernel_params(kernel);
    }
    Result<void> launch(driver::KernelId kernel, const LaunchConfig& config, void** args) override {
        return fake_.launch(kernel, config, args);
    }

private:
    fakes::FakeDriver fake_;
    std::atomic<std::int64_t> ns_{0};
};

CacheOptions fake_options(const std::string& directory, std::shared_ptr<driver::Driver> driver) {
    CacheOptions options;
    options.driver = std::move(driver);
    options.disk_directory = directory;
    return options;
}

struct ChildTimes {
    double open_ms = 0;     // the cache's construction
    double warm_up_ms = 0;  // warm_up() of every kernel
    double driver_ms = 0;   // of it, in the fake's loads and kernel lookups
};

}  // namespace

int run_fake_warm_child(const std::string& mode, const std::string& directory,
                        const std::string& spec, int workers) {
    std::optional<KernelSet> set = child_kernel_set(spec);  // before any clock starts
    if (!set) return 1;
    auto driver = std::make_shared<TimedDriver>();
    CacheOptions options = fake_options(directory, driver);
    options.bundle_warm_ups = mode == "bundled";
    profile_window("enable");
    const auto start = std::chrono::steady_clock::now();
    KernelCache cache(options);
    const double open_ms = ms_since(start);
    const auto warm_start = std::chrono::steady_clock::now();
    const auto results = cache.warm_up(set->handed_over_items(), static_cast<unsigned>(workers));
    const double warm_up_ms = ms_since(warm_start);
    profile_window("disable");
    for (const auto& result : results) {
        if (!result) {
            std::fprintf(stderr, "a kernel did not load: %s\n", result.error().message().c_str());
            return 1;
        }
    }
    if (cache.stats().disk_hits != static_cast<std::uint64_t>(set->count())) {
        std::fprintf(stderr, "%llu of %d kernels from the disk tier\n",
                     static_cast<unsigned long long>(cache.stats().disk_hits), set->count());
        return 1;
    }
    std::printf("%.4f %.4f %.4f\n", open_ms, warm_up_ms, driver->ms());
    return 0;
}

std::optional<FakeWarmStart> fake_warm_start(const std::string& spec, const std::string& directory,
                                             int workers, int rounds, std::string& note) {
    std::optional<KernelSet> set = kernel_set(spec, note);
    if (!set) return std::nullopt;
    std::filesystem::remove_all(directory);
    {
        CacheOptions options = fake_options(directory, std::make_shared<fakes::FakeDriver>());
        options.bundle_warm_ups = true;
        KernelCache fill(options);
        for (const auto& result :
             fill.warm_up(set->warm_up_items(), static_cast<unsigned>(workers))) {
            if (!result) {
                note = "the fill's warm-up failed: " + result.error().message();
                return std::nullopt;
            }
        }
        fill.wait_for_uploads();  // its bundles linked and stored
    }
    std::vector<double> open[2], warm[2], driver[2];
    for (int round = 0; round < 2 * rounds; ++round) {
        const int which = round % 2;  // 0: bundled, 1: one module a key
        const auto out = run_self({"--fake-warm-child", which == 0 ? "bundled" : "per-key",
                                   directory, spec, std::to_string(workers)});
        ChildTimes times;
        std::istringstream in(out.value_or(""));
        if (!out || !(in >> times.open_ms >> times.warm_up_ms >> times.driver_ms)) {
            note = "a warm child failed (its standard error says why)";
            return std::nullopt;
        }
        open[which].push_back(times.open_ms);
        warm[which].push_back(times.warm_up_ms);
        driver[which].push_back(times.driver_ms);
    }
    std::filesystem::remove_all(directory);
    FakeWarmStart result;
    result.kernels = set->count();
    result.bundled_open_ms = median(open[0]);
    result.bundled_ms = median(warm[0]);
    result.bundled_driver_ms = median(driver[0]);
    result.per_key_open_ms = median(open[1]);
    result.per_key_ms = median(warm[1]);
    result.per_key_driver_ms = median(driver[1]);
    return result;
}

std::string format_fake_warm_start(const FakeWarmStart& run, int workers, int rounds) {
    std::string text;
    const auto kernels = static_cast<double>(run.kernels);
    append(text,
           "| kcache over the fake driver, warm: a new process opens a new cache on the disk tier "
           "a warm-up filled and asks for all %d kernels at once (median of %d, in turns; the "
           "fake's loads copy the cubins) | cache's opening ms | warm_up ms | per kernel ms | of "
           "warm_up: in the fake's loads and lookups, ms | the rest (kcache's own), per kernel "
           "ms |\n|---|---:|---:|---:|---:|---:|\n",
           run.kernels, rounds);
    const auto row = [&](const char* what, double open_ms, double ms, double driver_ms) {
        append(text, "| warm_up, %d threads, %s | %.3f | %.3f | %.4f | %.3f | %.4f |\n", workers,
               what, open_ms, ms, ms / kernels, driver_ms, (ms - driver_ms) / kernels);
    };
    row("its bundles loaded", run.bundled_open_ms, run.bundled_ms, run.bundled_driver_ms);
    row("one module a key", run.per_key_open_ms, run.per_key_ms, run.per_key_driver_ms);
    text += "\n";
    return text;
}

std::string run_fake_warm_start(const std::string& spec, const std::string& directory, int workers,
                                int rounds, std::string& note) {
    const std::optional<FakeWarmStart> run =
        fake_warm_start(spec, directory, workers, rounds, note);
    return run ? format_fake_warm_start(*run, workers, rounds) : std::string();
}

}  // namespace kcache::bench
