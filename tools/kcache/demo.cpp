// SPDX-License-Identifier: Apache-2.0
#include "tools/kcache/demo.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "driver/device_memory.hpp"
#include "kcache/kernel_cache.hpp"
#include "ptx_kernels.hpp"
#include "tools/kcache/output.hpp"

namespace kcache::tool {
namespace {

struct Shape {
    int rows;
    int cols;
};

// Shapes an inference engine would meet: short rows, a long row, an odd width.
const Shape kShapes[] = {{64, 32}, {16, 1000}, {8, 1500}};

struct PassResult {
    std::uint64_t hits = 0;
    std::uint64_t misses = 0;
    int launches = 0;
    double milliseconds = 0;
};

LaunchConfig linear(std::uint32_t threads) {
    LaunchConfig config;
    config.block.x = 128;
    config.grid.x = (threads + 127) / 128;
    return config;
}

// One "layer" per shape: y = softmax(x) row-wise, g = gelu(y), out = g + x.
Result<void> run_layer(KernelCache& cache, const Shape& shape, driver::DeviceBuffer& x,
                       driver::DeviceBuffer& y, driver::DeviceBuffer& out, int& launches) {
    const std::uint32_t n = static_cast<std::uint32_t>(shape.rows * shape.cols);
    const std::uint32_t rows = static_cast<std::uint32_t>(shape.rows);
    std::uint64_t px = x.address(), py = y.address(), pout = out.address();

    const std::string softmax_key = "softmax:" + std::to_string(shape.cols);
    auto softmax = cache.kernel(
        softmax_key, [&] { return Source::ptx(examples::softmax_rows_ptx(shape.cols)); },
        "softmax_rows");
    if (!softmax) return softmax.error();
    if (auto r = softmax->launch_with(linear(rows), py, px, rows); !r) return r;

    auto gelu = cache.kernel(
        "gelu:" + std::to_string(n), [] { return Source::ptx(examples::gelu_ptx()); }, "gelu");
    if (!gelu) return gelu.error();
    if (auto r = gelu->launch_with(linear(n), py, py, n); !r) return r;

    auto add = cache.kernel(
        "residual_add:" + std::to_string(n),
        [] { return Source::ptx(examples::residual_add_ptx()); }, "residual_add");
    if (!add) return add.error();
    if (auto r = add->launch_with(linear(n), pout, py, px, n); !r) return r;
    launches += 3;
    return ok();
}

std::vector<float> reference(const std::vector<float>& x, const Shape& shape) {
    auto y = examples::softmax_rows_ref(x, shape.rows, shape.cols);
    auto g = examples::gelu_ref(y);
    return examples::residual_add_ref(g, x);
}

double max_relative_error(const std::vector<float>& got, const std::vector<float>& want) {
    double worst = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
        double err = std::fabs(double(got[i]) - want[i]) / (std::fabs(double(want[i])) + 1e-6);
        if (!(err <= worst)) worst = err;  // NaN propagates as "worst"
    }
    return worst;
}

// The demo's kernel set, as run_layer() asks for it: (key, source).
struct DemoKernel {
    std::string key;
    std::function<Source()> source;
};

std::vector<DemoKernel> demo_kernels() {
    std::vector<DemoKernel> out;
    for (const Shape& shape : kShapes) {
        const int n = shape.rows * shape.cols;
        const int cols = shape.cols;
        out.push_back({"softmax:" + std::to_string(cols),
                       [cols] { return Source::ptx(examples::softmax_rows_ptx(cols)); }});
        out.push_back(
            {"gelu:" + std::to_string(n), [] { return Source::ptx(examples::gelu_ptx()); }});
        out.push_back({"residual_add:" + std::to_string(n),
                       [] { return Source::ptx(examples::residual_add_ptx()); }});
    }
    return out;
}

void put_tier_counts(Json& document, const CacheStats& stats) {
    document["compiles"] = stats.compiles;
    document["memory_hits"] = stats.memory_hits;
    document["disk_hits"] = stats.disk_hits;
    document["disk_writes"] = stats.disk_writes;
    document["disk_errors"] = stats.disk_errors;
    document["disk_enabled"] = stats.disk_enabled;
}

// Without a GPU the demo still does what a CPU-only build machine can: compile its kernel set
// into the cache for a GPU arch, so that a later run on a GPU compiles nothing.
int run_without_gpu(const DemoOptions& options, const std::string& reason,
                    const CacheOptions& cache_options) {
    constexpr int kArch = 90;  // the H200's; a CPU machine has no device to ask
    KernelCache cache(cache_options);
    int compiled = 0;
    int found = 0;
    int in_memory = 0;
    std::string failure;
    for (const auto& kernel : demo_kernels()) {
        auto origin = cache.prebuild(kernel.key, kernel.source, kArch);
        if (!origin) {
            failure = origin.error().message();
            break;
        }
        if (*origin == Provenance::kCompiled) ++compiled;
        if (*origin == Provenance::kDiskTier) ++found;
        if (*origin == Provenance::kMemoryTier) ++in_memory;
    }
    // Where each prebuild found its artifact: a prebuild is no lookup, so the cache's tier
    // counters (lookups') do not show it.
    CacheStats stats = cache.stats();
    stats.compiles = static_cast<std::uint64_t>(compiled);
    stats.disk_hits = static_cast<std::uint64_t>(found);
    stats.memory_hits = static_cast<std::uint64_t>(in_memory);
    if (options.json) {
        Json document = json_document();
        document["gpu"] = false;
        put_bytes(document, "reason", reason);
        document["arch"] = kArch;
        put_tier_counts(document, stats);
        document["launched"] = 0;
        if (!failure.empty()) put_bytes(document, "prebuild_error", failure);
        print_json(document);
        return 0;
    }
    std::printf("kcache demo: no GPU here (%s).\n", reason.c_str());
    if (!failure.empty()) {
        std::printf(
            "Nothing can be launched, and the kernels could not be compiled ahead of "
            "time either: %s\n",
            failure.c_str());
        return 0;
    }
    std::printf(
        "Nothing can be launched; the demo's %zu kernels were prepared for sm_%d in the cache "
        "instead: %d compiled now, %d found on disk, the rest share a compiled source%s.\n",
        demo_kernels().size(), kArch, compiled, found,
        stats.disk_writes > 0 || stats.disk_hits > 0 ? " (kept on disk)"
                                                     : " (memory only: nothing reached the disk)");
    return 0;
}

}  // namespace

int run_demo(const DemoOptions& options) {
    // As KernelCache::global(): a bad setting is said once and the others kept.
    CacheOptions cache_options = CacheOptions::from_env_lenient();
    auto devices = driver::device_count();
    if (!devices) return run_without_gpu(options, devices.error().message(), cache_options);
    auto context = driver::PrimaryContext::open(0);
    if (!context) {
        std::fprintf(stderr, "kcache demo: %s\n", context.error().describe().c_str());
        return 1;
    }
    KernelCache cache(std::move(cache_options));

    // Inputs, buffers and CPU references per shape.
    std::mt19937 rng(1234);
    std::normal_distribution<float> normal(0.0f, 2.0f);
    struct Buffers {
        std::vector<float> x;
        driver::DeviceBuffer dx, dy, dout;
    };
    std::vector<Buffers> buffers;
    for (const Shape& shape : kShapes) {
        std::vector<float> x(static_cast<std::size_t>(shape.rows * shape.cols));
        for (float& v : x) v = normal(rng);
        const std::size_t bytes = x.size() * sizeof(float);
        auto dx = driver::DeviceBuffer::allocate(bytes);
        auto dy = driver::DeviceBuffer::allocate(bytes);
        auto dout = driver::DeviceBuffer::allocate(bytes);
        if (!dx || !dy || !dout) {
            std::fprintf(stderr, "kcache demo: device allocation failed\n");
            return 1;
        }
        if (auto r = dx->upload(x); !r) {
            std::fprintf(stderr, "kcache demo: %s\n", r.error().describe().c_str());
            return 1;
        }
        buffers.push_back({std::move(x), std::move(*dx), std::move(*dy), std::move(*dout)});
    }

    if (!options.json) {
        std::printf("kcache demo on %s (sm_%d): %d passes over %zu layers\n",
                    context->info().name.c_str(), context->info().arch, options.passes,
                    std::size(kShapes));
    }
    std::vector<PassResult> passes;
    for (int pass = 0; pass < options.passes; ++pass) {
        reset_thread_stats();
        PassResult result;
        const auto start = std::chrono::steady_clock::now();
        for (std::size_t i = 0; i < std::size(kShapes); ++i) {
            auto r = run_layer(cache, kShapes[i], buffers[i].dx, buffers[i].dy, buffers[i].dout,
                               result.launches);
            if (!r) {
                std::fprintf(stderr, "kcache demo: %s\n", r.error().describe().c_str());
                return 1;
            }
        }
        if (auto r = context->synchronize(); !r) {
            std::fprintf(stderr, "kcache demo: %s\n", r.error().describe().c_str());
            return 1;
        }
        result.milliseconds =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                .count();
        result.hits = thread_stats().hits;
        result.misses = thread_stats().misses;
        passes.push_back(result);
        if (!options.json) {
            std::printf("  pass %d: %2d launches, %2llu misses, %2llu hits, %8.2f ms\n", pass + 1,
                        result.launches, static_cast<unsigned long long>(result.misses),
                        static_cast<unsigned long long>(result.hits), result.milliseconds);
        }
    }

    double worst = 0;
    for (std::size_t i = 0; i < std::size(kShapes); ++i) {
        auto got = buffers[i].dout.download_floats();
        if (!got) {
            std::fprintf(stderr, "kcache demo: %s\n", got.error().describe().c_str());
            return 1;
        }
        worst = std::max(worst, max_relative_error(*got, reference(buffers[i].x, kShapes[i])));
    }
    const bool correct = worst <= 1e-3;
    const CacheStats stats = cache.stats();
    int launched = 0;
    for (const auto& p : passes) launched += p.launches;
    if (options.json) {
        Json document = json_document();
        document["gpu"] = true;
        put_bytes(document, "device", context->info().name);
        document["arch"] = context->info().arch;
        document["passes"] = options.passes;
        document["launched"] = launched;
        put_tier_counts(document, stats);
        document["hits"] = stats.hits;
        document["misses"] = stats.misses;
        document["compile_seconds"] = double(stats.compile_ns) / 1e9;
        document["max_relative_error"] = worst;
        document["correct"] = correct;
        print_json(document);
    } else {
        std::printf(
            "  %llu kernels compiled (%.1f ms), %llu from the memory tier, %llu from disk, "
            "%llu hits; results %s (max relative error %.2g against the CPU reference)\n",
            static_cast<unsigned long long>(stats.compiles), double(stats.compile_ns) / 1e6,
            static_cast<unsigned long long>(stats.memory_hits),
            static_cast<unsigned long long>(stats.disk_hits),
            static_cast<unsigned long long>(stats.hits), correct ? "match" : "DO NOT MATCH", worst);
    }
    return correct ? 0 : 1;
}

}  // namespace kcache::tool
