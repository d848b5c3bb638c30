// SPDX-License-Identifier: Apache-2.0
// CUDA C++ measurements for issue 3: how NVRTC scales across threads of one process (light and
// heavy-header kernels; no GPU needed), a warm new process having its CUDA C++ kernel ready from
// the disk tier (context creation timed apart), and kcache's warm-up of CUDA C++ kernels against
// compiling them one by one.

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench.hpp"
#include "bench/child_process.hpp"
#include "compile/compiler.hpp"
#include "compile/worker_pool.hpp"
#include "driver/cuda_api.hpp"
#include "driver/device_memory.hpp"
#include "kcache/kernel_cache.hpp"
#include "store/cache_directory.hpp"
#include "util/files.hpp"

namespace kcache::bench {

std::string cuda_include_root() {
    for (const char* variable : {"CUDA_HOME", "CUDA_PATH"}) {
        if (const char* root = std::getenv(variable); root != nullptr && *root != '\0') {
            return std::string(root) + "/include";
        }
    }
    return "/usr/local/cuda/include";
}

namespace {

// A distinct module per `variant`. Light: a few lines of arithmetic. Heavy: CUB's block reduce,
// the kind of header an inference engine's generated kernels pull in.
Source cuda_kernel(int variant, bool heavy) {
    if (!heavy) {
        return Source::cuda(
            "extern \"C\" __global__ void scale(float* out, const float* in, int n) {\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i < n) out[i] = in[i] * " +
            std::to_string(variant + 1) + ".0f + 0.5f;\n}\n");
    }
    const std::string root = cuda_include_root();
    return Source::cuda(
        "#include <cub/block/block_reduce.cuh>\n"
        "extern \"C\" __global__ void block_sum(float* out, const float* in) {\n"
        "    using Reduce = cub::BlockReduce<float, 128>;\n"
        "    __shared__ typename Reduce::TempStorage storage;\n"
        "    float v = Reduce(storage).Sum(in[blockIdx.x * 128 + threadIdx.x] * " +
            std::to_string(variant + 1) +
            ".0f);\n"
            "    if (threadIdx.x == 0) out[blockIdx.x] = v;\n}\n",
        {"-std=c++17", "-I" + root + "/cccl", "-I" + root});
}

const char* kernel_name(bool heavy) {
    return heavy ? "block_sum" : "scale";
}

compile::CudaProgram program_of(const Source& source) {
    compile::CudaProgram program;
    program.code = source.bytes;
    program.options = source.options;
    return program;
}

// Wall time to compile `count` distinct kernels on `threads` threads of this process, or through
// `workers` (one process per thread) when given.
double nvrtc_ms(int count, int first_variant, bool heavy, int threads, int arch, bool& ok,
                compile::WorkerPool* workers = nullptr) {
    std::atomic<int> next{0};
    std::atomic<bool> failed{false};
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    pool.reserve(static_cast<std::size_t>(threads));
    for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&] {
            for (int i = next.fetch_add(1); i < count; i = next.fetch_add(1)) {
                const auto program = program_of(cuda_kernel(first_variant + i, heavy));
                auto compiled = workers != nullptr
                                    ? workers->compile_cuda(program, compile::Target{arch})
                                    : compile::compile_cuda(program, compile::Target{arch});
                if (!compiled) {
                    std::fprintf(stderr, "%s\n", compiled.error().describe().c_str());
                    failed = true;
                }
            }
        });
    }
    for (auto& thread : pool) thread.join();
    ok = ok && !failed;
    return ms_since(start);
}

}  // namespace

std::string run_nvrtc_scaling(int arch, int light_count, int heavy_count, int threads,
                              std::string& note) {
    bool ok = true;
    // Warm NVRTC up (its load and first compile) before anything is timed.
    (void)nvrtc_ms(1, 100000, false, 1, arch, ok);
    // Worker processes (`kcache compile-worker` beside this program), started and warmed before
    // the timing like this process's NVRTC.
    std::unique_ptr<compile::WorkerPool> workers;
    if (const std::string command = compile::default_worker_command(); !command.empty()) {
        if (auto pool = compile::WorkerPool::start(command, {"compile-worker"},
                                                   static_cast<std::size_t>(threads))) {
            workers = std::move(*pool);
            (void)nvrtc_ms(threads, 200000, false, threads, arch, ok, workers.get());
        }
    }
    std::string table = "| NVRTC, sm_" + std::to_string(arch) + " | kernels | 1 thread ms | " +
                        std::to_string(threads) + " threads, one process ms | ratio | " +
                        std::to_string(threads) + " worker processes ms | ratio |\n" +
                        "|---|---:|---:|---:|---:|---:|---:|\n";
    for (bool heavy : {false, true}) {
        const int count = heavy ? heavy_count : light_count;
        if (count == 0) continue;
        const double one = nvrtc_ms(count, 0, heavy, 1, arch, ok);
        const double many = nvrtc_ms(count, 1000, heavy, threads, arch, ok);
        const double spread =
            workers ? nvrtc_ms(count, 2000, heavy, threads, arch, ok, workers.get()) : 0;
        char row[256];
        std::snprintf(row, sizeof row, "| %s | %d | %.1f | %.1f | %.2fx | %.1f | %.2fx |\n",
                      heavy ? "heavy (CUB block reduce)" : "light (a few lines)", count, one, many,
                      one / many, spread, spread > 0 ? one / spread : 0.0);
        table += row;
    }
    if (!workers) table += "\n(no `kcache` beside this program: worker processes not measured)\n";
    if (!ok) note = "a compile failed";
    return table;
}

int run_cuda_warm_child(const std::string& directory, bool heavy) {
    const auto context_start = std::chrono::steady_clock::now();
    auto context = driver::PrimaryContext::open(0);
    if (!context || !context->make_current()) return 3;
    const double context_ms = ms_since(context_start);
    CacheOptions options;
    options.disk_directory = directory;
    KernelCache cache(options);
    // The first kernel of the process, then a second: the difference is what a process pays once.
    double ready_ms[2] = {0, 0};
    for (int variant = 0; variant < 2; ++variant) {
        const auto start = std::chrono::steady_clock::now();
        auto kernel = cache.kernel(
            std::string(kernel_name(heavy)) + ":" + std::to_string(variant),
            [variant, heavy] { return cuda_kernel(variant, heavy); }, kernel_name(heavy));
        ready_ms[variant] = ms_since(start);
        if (!kernel) {
            std::fprintf(stderr, "%s\n", kernel.error().describe().c_str());
            return 4;
        }
    }
    std::printf("%.4f %.4f %.4f %llu\n", context_ms, ready_ms[0], ready_ms[1],
                static_cast<unsigned long long>(cache.stats().compiles));
    return 0;
}

int run_cubin_floor_child(const std::string& first, const std::string& second, bool heavy) {
    const auto context_start = std::chrono::steady_clock::now();
    auto context = driver::PrimaryContext::open(0);
    if (!context || !context->make_current()) return 3;
    const double context_ms = ms_since(context_start);
    const auto& api = driver::cuda_api();
    if (!api) return 3;
    double ready_ms[2] = {0, 0};
    const std::string files[2] = {first, second};
    for (int i = 0; i < 2; ++i) {
        const auto start = std::chrono::steady_clock::now();
        auto read = util::read_named_file(files[i], store::kMaxEntryBytes);
        if (!read || !*read) return 4;
        const std::string& cubin = **read;
        CUmodule module = nullptr;
        CUfunction function = nullptr;
        if ((*api)->cuModuleLoadData(&module, cubin.data()) != CUDA_SUCCESS ||
            (*api)->cuModuleGetFunction(&function, module, kernel_name(heavy)) != CUDA_SUCCESS) {
            return 4;
        }
        ready_ms[i] = ms_since(start);
    }
    std::printf("%.4f %.4f %.4f 0\n", context_ms, ready_ms[0], ready_ms[1]);
    return 0;
}

namespace {

struct ChildTimes {
    double context_ms = 0;
    double first_ms = 0;   // the process's first kernel
    double second_ms = 0;  // its second
    unsigned long long compiles = 0;
};

std::vector<WarmUpItem> warm_up_items(int first_variant, int count) {
    std::vector<WarmUpItem> items;
    items.reserve(static_cast<std::size_t>(count));
    for (int i = 0; i < count; ++i) {
        const int variant = first_variant + i;
        items.push_back({"block_sum:" + std::to_string(i),
                         [variant]() -> Result<Source> { return cuda_kernel(variant, true); },
                         kernel_name(true)});
    }
    return items;
}

// Runs this program as a child (`flag` and its arguments); its times.
bool spawn_child(const std::vector<std::string>& args, ChildTimes& times) {
    auto out = run_self(args);
    return out && std::sscanf(out->c_str(), "%lf %lf %lf %llu", &times.context_ms, &times.first_ms,
                              &times.second_ms, &times.compiles) == 4;
}

}  // namespace

std::string run_cuda_warm_start(const std::string& directory, int warm_up_count,
                                std::string& note) {
    auto context = driver::PrimaryContext::open(0);
    if (!context) {
        note = context.error().message();
        return {};
    }
    (void)context->make_current();
    std::filesystem::remove_all(directory);
    std::string table =
        "| CUDA C++ (CUB block reduce), new process | context ms | first kernel ready ms | "
        "second kernel ready ms | compiles |\n|---|---:|---:|---:|---:|\n";
    auto row = [&](const std::string& what, const ChildTimes& t) {
        char text[512];
        std::snprintf(text, sizeof text, "| %s | %.1f | %.3f | %.3f | %llu |\n", what.c_str(),
                      t.context_ms, t.first_ms, t.second_ms, t.compiles);
        table += text;
    };
    for (bool heavy : {true, false}) {
        const std::string kind = heavy ? "heavy" : "light";
        const std::string what = heavy ? "CUB block reduce" : "a few lines";
        ChildTimes times;
        if (!spawn_child({"--cuda-warm-child", directory, kind}, times)) {
            note = "the cold child failed";
            return {};
        }
        row("cold, " + what + ": empty cache (NVRTC load + compile + store + load)", times);
        // The floor in a new process: the same cubins read from a file and loaded, no kcache.
        std::string floor_files[2];
        for (int variant = 0; variant < 2; ++variant) {
            floor_files[variant] = directory;
            floor_files[variant] += "/floor" + std::to_string(variant) + "-";
            floor_files[variant] += kind;
            floor_files[variant] += ".cubin";
        }
        // And NVRTC's own cubin, which kcache stored before its lean recipe.
        std::string own_files[2];
        for (int variant = 0; variant < 2; ++variant) {
            own_files[variant] = floor_files[variant] + ".nvrtc";
            const compile::CudaProgram program = program_of(cuda_kernel(variant, heavy));
            for (auto recipe : {compile::CudaRecipe::kChosen, compile::CudaRecipe::kNvrtcCubin}) {
                auto compiled =
                    compile::compile_cuda(program, compile::Target{context->info().arch}, recipe);
                if (!compiled) {
                    note = compiled.error().describe();
                    return {};
                }
                const bool own = recipe == compile::CudaRecipe::kNvrtcCubin;
                std::ofstream(own ? own_files[variant] : floor_files[variant], std::ios::binary)
                    << compiled->cubin;
            }
        }
        // Alternating kcache and floor children, 7 of each: medians, and kcache's slowest.
        std::vector<double> warm_first, warm_second, floor_first, floor_second, contexts;
        std::vector<double> own_first, own_second;
        double slowest = 0;
        for (int run = 0; run < 7; ++run) {
            ChildTimes warm, floor;
            if (!spawn_child({"--cuda-warm-child", directory, kind}, warm) || warm.compiles != 0) {
                note = "a warm child failed or compiled";
                return {};
            }
            if (!spawn_child({"--cubin-floor-child", floor_files[0], floor_files[1], kind},
                             floor)) {
                note = "a floor child failed";
                return {};
            }
            ChildTimes own;
            if (!spawn_child({"--cubin-floor-child", own_files[0], own_files[1], kind}, own)) {
                note = "a floor child (NVRTC's own cubin) failed";
                return {};
            }
            own_first.push_back(own.first_ms);
            own_second.push_back(own.second_ms);
            warm_first.push_back(warm.first_ms);
            warm_second.push_back(warm.second_ms);
            floor_first.push_back(floor.first_ms);
            floor_second.push_back(floor.second_ms);
            contexts.push_back(warm.context_ms);
            slowest = std::max(slowest, warm.first_ms);
        }
        ChildTimes summary{median(contexts), median(warm_first), median(warm_second), 0};
        row("warm, " + what + ": kcache from the disk tier (median of 7 new processes)", summary);
        summary.first_ms = slowest;
        summary.second_ms = 0;
        row("warm, " + what + ": kcache, slowest first kernel of the 7", summary);
        ChildTimes floor_summary{0, median(floor_first), median(floor_second), 0};
        row("floor, " + what +
                ": the same cubin read from a file and loaded, no kcache (median "
                "of 7)",
            floor_summary);
        ChildTimes own_summary{0, median(own_first), median(own_second), 0};
        row("floor, " + what +
                ": NVRTC's own cubin (the recipe before the lean one) read from a file and "
                "loaded (median of 7)",
            own_summary);
    }

    // Warm-up of distinct CUDA C++ kernels, cold, against compiling them one by one.
    // Three sets of distinct kernels, so that no run finds another's artifacts.
    const std::vector<WarmUpItem> items = warm_up_items(5000, warm_up_count);
    const std::vector<WarmUpItem> items_again = warm_up_items(9000, warm_up_count);
    const std::vector<WarmUpItem> items_workers = warm_up_items(13000, warm_up_count);
    bool ok = true;
    double one_by_one = 0, parallel = 0, with_workers = 0;
    {
        std::filesystem::remove_all(directory);
        CacheOptions options;
        options.disk_directory = directory;
        KernelCache cache(options);
        const auto start = std::chrono::steady_clock::now();
        for (const auto& item : items)
            ok = ok && cache.kernel(item.key, item.make_source, item.kernel_name).ok();
        one_by_one = ms_since(start);
    }
    {
        std::filesystem::remove_all(directory);
        CacheOptions options;
        options.disk_directory = directory;
        KernelCache cache(options);
        const auto start = std::chrono::steady_clock::now();
        for (const auto& result : cache.warm_up(items_again, 16)) ok = ok && result.ok();
        parallel = ms_since(start);
    }
    if (!compile::default_worker_command().empty()) {
        std::filesystem::remove_all(directory);
        CacheOptions options;
        options.disk_directory = directory;
        options.compile_workers = 16;
        KernelCache cache(options);
        const auto start = std::chrono::steady_clock::now();  // worker start-up included
        for (const auto& result : cache.warm_up(items_workers, 16)) ok = ok && result.ok();
        with_workers = ms_since(start);
    }
    if (!ok) note = "a CUDA C++ warm-up compile failed";
    char text[768];
    std::snprintf(text, sizeof text,
                  "\n| %d distinct CUDA C++ kernels (CUB), cold | total ms | vs one by one |\n"
                  "|---|---:|---:|\n| kernel() one by one, 1 thread | %.1f | 1.00x |\n"
                  "| kcache warm_up, 16 threads, NVRTC in this process | %.1f | %.2fx |\n"
                  "| kcache warm_up, 16 threads, 16 compile worker processes (start-up "
                  "included) | %.1f | %.2fx |\n",
                  warm_up_count, one_by_one, parallel, one_by_one / parallel, with_workers,
                  with_workers > 0 ? one_by_one / with_workers : 0.0);
    table += text;
    return table;
}

}  // namespace kcache::bench
