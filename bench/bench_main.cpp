// SPDX-License-Identifier: Apache-2.0
// kcache_bench: hit path (kcache vs the seed model, 1..16 threads) and, with a GPU, launch cost.
// Without a GPU the hit path runs over the fake driver, which answers current_arch() with no
// driver call; absolute numbers only count from a GPU machine.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "bench/bench.hpp"
#include "driver/device_memory.hpp"
#include "testing/fake_driver.hpp"
#include "util/epoch.hpp"

namespace {

std::vector<int> parse_list(const char* text) {
    std::vector<int> out;
    std::stringstream in(text);
    std::string item;
    while (std::getline(in, item, ',')) out.push_back(std::stoi(item));
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    using namespace kcache;
    bench::HitPathOptions hit;
    std::string out_path;
    bool smoke = false;
    bool force_fake = false;
    bool kernel_speed = false;
    std::vector<int> churn_counts;
    bool launch_bench = true;
    std::string tiers_directory;
    std::string cuda_directory;
    std::string ptx_directory;
    std::string remote_directory;
    std::string corpus_directory;
    std::string scaling_directory;
    std::string driver_jit_directory;
    std::string fake_warm_spec;
    int workers = static_cast<int>(std::thread::hardware_concurrency());
    int corpus_prebuild_arch = 0;
    bool corpus_warm = false;
    std::string scale_directory;
    bench::ScaleOptions scale;
    int rounds = 7;
    bool rounds_given = false;
    int nvrtc_arch = 0;
    int light = 16, heavy = 8, nvrtc_threads = 16, cuda_warm_up = 16;
    int launches = 2000;
    int blocks = 15;
    std::vector<int> launch_threads = {1, 16};
    for (int i = 1; i < argc; ++i) {
        auto next = [&]() -> const char* {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "kcache_bench: %s needs a value\n", argv[i]);
                std::exit(2);
            }
            return argv[++i];
        };
        if (!std::strcmp(argv[i], "--smoke")) {
            smoke = true;
        } else if (!std::strcmp(argv[i], "--tiers")) {
            tiers_directory = next();
        } else if (!std::strcmp(argv[i], "--cuda-warm-child")) {
            const std::string directory = next();
            return bench::run_cuda_warm_child(directory, std::strcmp(next(), "heavy") == 0);
        } else if (!std::strcmp(argv[i], "--cubin-floor-child")) {
            const std::string first = next();
            const std::string second = next();
            return bench::run_cubin_floor_child(first, second, std::strcmp(next(), "heavy") == 0);
        } else if (!std::strcmp(argv[i], "--ptx-warm-child")) {
            const std::string mode = next();
            const std::string directory = next();
            return bench::run_ptx_warm_child(mode, directory, next());
        } else if (!std::strcmp(argv[i], "--fake-warm-child")) {
            const std::string mode = next();
            const std::string directory = next();
            const std::string spec = next();
            return bench::run_fake_warm_child(mode, directory, spec, std::atoi(next()));
        } else if (!std::strcmp(argv[i], "--fake-warm-start")) {
            fake_warm_spec = next();
        } else if (!std::strcmp(argv[i], "--corpus-cold-child")) {
            const std::string mode = next();
            const std::string corpus = next();
            return bench::run_corpus_cold_child(mode, corpus, next());
        } else if (!std::strcmp(argv[i], "--scale-child")) {
            const std::string mode = next();
            const std::string directory = next();
            const int count = std::atoi(next());
            return bench::run_scale_child(mode, directory, count, std::atoi(next()));
        } else if (!std::strcmp(argv[i], "--scale-fill")) {
            const std::string directory = next();
            return bench::run_scale_fill(directory, std::atoi(next()));
        } else if (!std::strcmp(argv[i], "--scale")) {
            scale_directory = next();
        } else if (!std::strcmp(argv[i], "--scale-max")) {
            scale.max_kernels = std::atoi(next());
        } else if (!std::strcmp(argv[i], "--scale-entries")) {
            scale.max_entries = std::atoi(next());
        } else if (!std::strcmp(argv[i], "--scale-kcache")) {
            scale.kcache = next();
        } else if (!std::strcmp(argv[i], "--corpus")) {
            corpus_directory = next();
        } else if (!std::strcmp(argv[i], "--corpus-warm")) {
            corpus_warm = true;
        } else if (!std::strcmp(argv[i], "--compile-scaling")) {
            scaling_directory = next();
        } else if (!std::strcmp(argv[i], "--driver-jit")) {
            driver_jit_directory = next();
        } else if (!std::strcmp(argv[i], "--workers")) {
            workers = std::max(1, std::atoi(next()));
        } else if (!std::strcmp(argv[i], "--corpus-prebuild")) {
            corpus_prebuild_arch = std::atoi(next());
        } else if (!std::strcmp(argv[i], "--remote-child")) {
            const std::string mode = next();
            const std::string directory = next();
            return bench::run_remote_child(mode, directory, next());
        } else if (!std::strcmp(argv[i], "--remote")) {
            remote_directory = next();
        } else if (!std::strcmp(argv[i], "--kernel-speed")) {
            kernel_speed = true;
        } else if (!std::strcmp(argv[i], "--module-churn")) {
            churn_counts = parse_list(next());
        } else if (!std::strcmp(argv[i], "--ptx-new-process")) {
            ptx_directory = next();
        } else if (!std::strcmp(argv[i], "--rounds")) {
            rounds = std::atoi(next());
            rounds_given = true;
        } else if (!std::strcmp(argv[i], "--cuda")) {
            cuda_directory = next();
        } else if (!std::strcmp(argv[i], "--cuda-warm-up")) {
            cuda_warm_up = std::atoi(next());
        } else if (!std::strcmp(argv[i], "--nvrtc-scaling")) {
            nvrtc_arch = std::atoi(next());
        } else if (!std::strcmp(argv[i], "--nvrtc-kernels")) {
            const std::vector<int> counts = parse_list(next());
            light = counts.at(0);
            heavy = counts.size() > 1 ? counts[1] : 0;
        } else if (!std::strcmp(argv[i], "--nvrtc-threads")) {
            nvrtc_threads = std::atoi(next());
        } else if (!std::strcmp(argv[i], "--no-launch")) {
            launch_bench = false;
        } else if (!std::strcmp(argv[i], "--fake")) {
            force_fake = true;
        } else if (!std::strcmp(argv[i], "--ms")) {
            hit.milliseconds = std::atoi(next());
        } else if (!std::strcmp(argv[i], "--threads")) {
            hit.threads = parse_list(next());
        } else if (!std::strcmp(argv[i], "--launch-threads")) {
            launch_threads = parse_list(next());
        } else if (!std::strcmp(argv[i], "--out")) {
            out_path = next();
        } else {
            std::fprintf(stderr,
                         "usage: kcache_bench [--smoke] [--fake] [--no-launch] [--tiers DIR] "
                         "[--ptx-new-process DIR [--rounds N]] [--remote DIR [--rounds N]] "
                         "[--compile-scaling PTX_DIR [--workers N]] "
                         "[--driver-jit PTX_DIR [--workers N] [--rounds N]] "
                         "[--fake-warm-start SPEC [--workers N] [--rounds N]] "
                         "[--corpus DIR [--rounds N] [--corpus-warm | --corpus-prebuild ARCH "
                         "[--threads N]]] "
                         "[--scale DIR [--scale-max N] [--scale-entries N] [--scale-kcache CLI] "
                         "[--rounds N]] [--scale-fill DIR N] "
                         "[--kernel-speed] [--module-churn 1000,10000] [--cuda DIR] "
                         "[--cuda-warm-up N] "
                         "[--nvrtc-scaling ARCH] "
                         "[--nvrtc-kernels LIGHT,HEAVY] [--nvrtc-threads N] [--ms N] "
                         "[--threads 1,2,4] "
                         "[--launch-threads 1,16] [--out FILE]\n");
            return 2;
        }
    }
    if (smoke) {  // a quick run that proves the program works (ctest)
        hit.threads = {1, 2};
        hit.milliseconds = 20;
        hit.repeats = 1;
        launches = 50;
        blocks = 2;
        launch_threads = {1, 2};
    }

    // A mode that prints one table alone: its table to stdout (and --out), its note to stderr.
    auto finish = [&](const std::string& table, const std::string& note) {
        std::fputs(table.c_str(), stdout);
        if (!note.empty()) std::fprintf(stderr, "kcache_bench: %s\n", note.c_str());
        if (!out_path.empty()) std::ofstream(out_path) << table;
        return table.empty() || !note.empty() ? 1 : 0;
    };
    auto work_directory = [](const char* prefix) {
        return (std::filesystem::temp_directory_path() / (prefix + std::to_string(::getpid())))
            .string();
    };
    if (!scaling_directory.empty()) {  // where a cold warm-up's time goes; no GPU needed
        std::string note;
        std::string table = bench::run_compile_scaling(
            scaling_directory, work_directory("kcache-scaling-"), workers, note);
        return finish(table, note);
    }
    if (!driver_jit_directory.empty()) {  // the driver's JIT as kcache's compiler, on a GPU
        std::string note;
        std::string table = bench::run_driver_jit(driver_jit_directory, workers,
                                                  rounds_given ? std::max(1, rounds) : 3, note);
        return finish(table, note);
    }
    if (!fake_warm_spec.empty()) {  // kcache's own share of a warm start; no GPU needed
        std::string note;
        std::string table =
            bench::run_fake_warm_start(fake_warm_spec, work_directory("kcache-fake-warm-"), workers,
                                       rounds_given ? std::max(1, rounds) : 5, note);
        return finish(table, note);
    }
    if (!scale_directory.empty()) {  // the memory and scale curve alone (issue 19)
        std::string note;
        if (rounds_given) scale.rounds = std::max(1, rounds);
        if (scale.kcache.empty()) {  // beside this program, where the build puts both
            scale.kcache =
                (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "kcache").string();
        }
        std::string table = bench::run_scale(scale_directory, scale, note);
        return finish(table, note);
    }
    // A directory of PTX kernels, or a CUDA C++ corpus (its kernels.tsv), alone (issue 19).
    if (!corpus_directory.empty()) {
        std::string note;
        const std::string work = work_directory("kcache-corpus-");
        // --corpus-prebuild: no GPU, the compile alone (threads: the largest of --threads).
        // --corpus-warm: its warm new processes alone (run_corpus's last table).
        std::string table;
        if (corpus_prebuild_arch != 0) {
            table = bench::run_corpus_prebuild(
                corpus_directory, work, corpus_prebuild_arch,
                *std::max_element(hit.threads.begin(), hit.threads.end()), note);
        } else if (corpus_warm) {
            table = bench::run_ptx_new_process_set(work, corpus_directory, rounds, note);
            std::filesystem::remove_all(work);
        } else {
            table = bench::run_corpus(corpus_directory, work, rounds, note);
        }
        return finish(table, note);
    }
    if (!remote_directory.empty()) {  // the remote tier alone
        std::string note;
        std::string table = bench::run_remote_tier(remote_directory, rounds, note);
        return finish(table, note);
    }
    if (!churn_counts.empty()) {  // the driver's cost per module, by modules held
        std::string note;
        std::string table = bench::run_module_churn(churn_counts, note);
        return finish(table, note);
    }
    if (!ptx_directory.empty() || kernel_speed) {  // PTX measurements alone
        std::string note;
        std::string table = kernel_speed ? bench::run_kernel_speed(note)
                                         : bench::run_ptx_new_process(ptx_directory, rounds, note);
        return finish(table, note);
    }
    if (nvrtc_arch != 0 || !cuda_directory.empty()) {  // CUDA C++ measurements alone
        std::string note;
        std::string table =
            nvrtc_arch != 0
                ? bench::run_nvrtc_scaling(nvrtc_arch, light, heavy, nvrtc_threads, note)
                : bench::run_cuda_warm_start(cuda_directory, cuda_warm_up, note);
        return finish(table, note);
    }
    if (!tiers_directory.empty()) {  // the issue-3 measurements in one process alone
        std::string note;
        std::string table = bench::run_warm_start(tiers_directory, note);
        return finish(table, note);
    }

    std::string report;
    auto devices = driver::device_count();
    std::unique_ptr<driver::PrimaryContext> context;
    if (devices && !force_fake) {
        auto opened = driver::PrimaryContext::open(0);
        if (!opened) {
            std::fprintf(stderr, "kcache_bench: %s\n", opened.error().describe().c_str());
            return 1;
        }
        context = std::make_unique<driver::PrimaryContext>(std::move(*opened));
        hit.driver = driver::default_driver();
        hit.thread_setup = [&] { (void)context->make_current(); };
        report += "device: " + context->info().name + " (sm_" +
                  std::to_string(context->info().arch) + "), " + hit.driver->describe() + "\n\n";
    } else {
        hit.driver = std::make_shared<fakes::FakeDriver>();
        report += std::string("device: none (") + (devices ? "--fake" : devices.error().message()) +
                  "); hit path and launch bookkeeping over the fake driver\n\n";
    }

    // A long-running process switches its pins to membarrier in the background after its first
    // hits; the timing below is of that steady state, so the switch is made before it.
    util::EpochDomain::global().register_membarrier_now();
    report += std::string("epoch pins: ") +
              (util::EpochDomain::global().asymmetric() ? "membarrier" : "a fence each") + "\n\n";
    report += "## Hit path: lookup by key returning a handle (median of " +
              std::to_string(hit.repeats) + " runs of " + std::to_string(hit.milliseconds) +
              " ms)\n\n";
    report += bench::format_hit_path(bench::run_hit_path(hit));

    if (context && launch_bench) {
        std::string note;
        auto rows = bench::run_launch_overhead(launches, blocks, launch_threads, note);
        report += "\n## Launch cost: residual_add with n = 0, " + std::to_string(launches) +
                  " launches per block, median of " + std::to_string(blocks) +
                  " interleaved blocks, one stream per thread\n\n";
        report +=
            rows.empty() ? "launch benchmark failed: " + note + "\n" : bench::format_launch(rows);
    }
    if (!context && launch_bench) {
        std::string note;
        auto rows = bench::run_launch_overhead_fake(launches * 50, blocks, note);
        report += "\n## Launch cost over the fake driver, its launch a no-op: " +
                  std::to_string(launches * 50) + " launches per block, median of " +
                  std::to_string(blocks) + " interleaved blocks, one thread\n\n";
        report +=
            rows.empty() ? "launch benchmark failed: " + note + "\n" : bench::format_launch(rows);
    }
    std::fputs(report.c_str(), stdout);
    if (!out_path.empty()) std::ofstream(out_path) << report;
    return 0;
}
