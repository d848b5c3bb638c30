// SPDX-License-Identifier: Apache-2.0
// The driver's own cost per module as one context holds more of them: one small cubin loaded N
// times (cuModuleLoadData) into a context of its own, then every module unloaded (cuModuleUnload)
// in the order they were loaded, in the reverse order or shuffled, or none unloaded and the
// context destroyed with them (cuCtxDestroy). A cache's end unloads every module it holds; this
// says whether the order it picks matters, and how a load's cost grows with the modules loaded
// before it. No kcache code is timed.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bench/bench.hpp"
#include "bench/open_gpu.hpp"
#include "compile/compiler.hpp"
#include "driver/cuda_api.hpp"
#include "driver/device_memory.hpp"
#include "ptx_kernels.hpp"

namespace kcache::bench {
namespace {

enum class Order { kLoaded, kReversed, kShuffled, kContextEnd };

const char* order_name(Order order) {
    switch (order) {
        case Order::kLoaded:
            return "as loaded (first loaded, first unloaded)";
        case Order::kReversed:
            return "reversed (last loaded, first unloaded)";
        case Order::kShuffled:
            return "shuffled";
        case Order::kContextEnd:
            return "none: the context destroyed with them";
    }
    return "?";
}

struct Churn {
    double load_us = 0;          // per module, all N
    double load_last_us = 0;     // per module, the last tenth loaded
    double unload_us = 0;        // per module, all N
    double unload_first_us = 0;  // per module, the first tenth unloaded
    double unload_last_us = 0;   // per module, the last tenth unloaded
};

double us_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
        .count();
}

// Loads `count` copies of `cubin` into a new context, then unloads them in `order` (or destroys
// the context with them); nullopt on a driver error.
std::optional<Churn> churn(const driver::CudaApi& cu, const std::string& cubin, int count,
                           Order order) {
    std::optional<driver::OwnedContext> context;
    if (auto created = driver::OwnedContext::create(0)) context.emplace(std::move(*created));
    if (!context) return std::nullopt;
    std::vector<CUmodule> modules(static_cast<std::size_t>(count), nullptr);
    const int tenth = std::max(1, count / 10);
    Churn result;
    bool ok = true;
    auto start = std::chrono::steady_clock::now();
    std::chrono::steady_clock::time_point last_tenth = start;
    for (int i = 0; i < count && ok; ++i) {
        if (i == count - tenth) last_tenth = std::chrono::steady_clock::now();
        ok = cu.cuModuleLoadData(&modules[static_cast<std::size_t>(i)], cubin.data()) ==
             CUDA_SUCCESS;
    }
    result.load_last_us = us_since(last_tenth) / tenth;
    result.load_us = us_since(start) / count;
    if (order == Order::kContextEnd) {
        start = std::chrono::steady_clock::now();
        context.reset();
        result.unload_us = us_since(start) / count;
        if (!ok) return std::nullopt;
        return result;
    }
    std::vector<std::size_t> at(modules.size());
    std::iota(at.begin(), at.end(), 0);
    if (order == Order::kReversed) std::reverse(at.begin(), at.end());
    if (order == Order::kShuffled) std::shuffle(at.begin(), at.end(), std::mt19937(20261207));
    start = std::chrono::steady_clock::now();
    double first_tenth = 0;
    for (int i = 0; i < count; ++i) {
        if (i == tenth) first_tenth = us_since(start);
        if (i == count - tenth) last_tenth = std::chrono::steady_clock::now();
        CUmodule& module = modules[at[static_cast<std::size_t>(i)]];
        if (module != nullptr && cu.cuModuleUnload(module) != CUDA_SUCCESS) ok = false;
        module = nullptr;
    }
    result.unload_last_us = us_since(last_tenth) / tenth;
    result.unload_us = us_since(start) / count;
    result.unload_first_us = first_tenth / tenth;
    if (!ok) return std::nullopt;
    return result;
}

}  // namespace

std::string run_module_churn(const std::vector<int>& counts, std::string& note) {
    std::optional<OpenGpu> gpu = open_gpu(note);
    if (!gpu) return {};
    const driver::CudaApi& cu = gpu->cu;
    auto compiled =
        compile::link_ptx(examples::residual_add_ptx(), compile::Target{gpu->context.info().arch});
    if (!compiled) {
        note = compiled.error().message();
        return {};
    }
    std::string text;
    append(text,
           "Device: %s. One cubin (%zu bytes, residual_add) loaded N times into one context, then "
           "every module unloaded; microseconds per module, each row a context of its own.\n\n"
           "| modules | unloaded | load | load, the last tenth | unload | unload, the first "
           "tenth | unload, the last tenth |\n|---:|---|---:|---:|---:|---:|---:|\n",
           gpu->context.info().name.c_str(), compiled->cubin.size());
    for (const int count : counts) {
        for (const Order order :
             {Order::kLoaded, Order::kReversed, Order::kShuffled, Order::kContextEnd}) {
            const auto run = churn(cu, compiled->cubin, std::max(count, 1), order);
            if (!run) {
                note = "a load or unload failed at " + std::to_string(count) + " modules";
                return text;
            }
            if (order == Order::kContextEnd) {
                append(text, "| %d | %s | %.2f | %.2f | %.2f | | |\n", count, order_name(order),
                       run->load_us, run->load_last_us, run->unload_us);
            } else {
                append(text, "| %d | %s | %.2f | %.2f | %.2f | %.2f | %.2f |\n", count,
                       order_name(order), run->load_us, run->load_last_us, run->unload_us,
                       run->unload_first_us, run->unload_last_us);
            }
        }
    }
    text += "\n";
    return text;
}

}  // namespace kcache::bench
