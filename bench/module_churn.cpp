// SPDX-License-Identifier: Apache-2.0
// The driver's own cost per module as one context holds more of them: N modules loaded
// (cuModuleLoadData) into a context of its own, each one small cubin again or each a cubin of its
// own (the same kernel under another name), its kernel looked up (cuModuleGetFunction) or not;
// then every module unloaded (cuModuleUnload) in the order they were loaded, in the reverse order
// or shuffled, or none unloaded and the context destroyed with them (cuCtxDestroy). How a load's
// cost grows with the modules loaded before it, what in it grows, and whether the order a cache's
// end unloads in matters. No kcache code is timed.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <thread>
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

// What a row loads: `cubins` round robin (one, or one a module), each module's kernel looked up
// as `names` round robin says where `lookup`.
struct Fill {
    const std::vector<std::string>* cubins;
    const std::vector<std::string>* names;
    bool lookup;
};

// Loads `count` modules as `fill` says into a new context, then unloads them in `order` (or
// destroys the context with them); nullopt on a driver error.
std::optional<Churn> churn(const driver::CudaApi& cu, const Fill& fill, int count, Order order) {
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
        const auto n = static_cast<std::size_t>(i);
        CUmodule& module = modules[n];
        ok = cu.cuModuleLoadData(&module, (*fill.cubins)[n % fill.cubins->size()].data()) ==
             CUDA_SUCCESS;
        CUfunction function = nullptr;
        if (ok && fill.lookup) {
            const std::string& name = (*fill.names)[n % fill.names->size()];
            ok = cu.cuModuleGetFunction(&function, module, name.c_str()) == CUDA_SUCCESS;
        }
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

// `count` cubins of residual_add, each entry renamed residual_add_<i>, linked on every core.
std::optional<std::vector<std::string>> distinct_cubins(const std::string& ptx, int count,
                                                        const compile::Target& target,
                                                        std::vector<std::string>& names) {
    names.clear();
    for (int i = 0; i < count; ++i) names.push_back("residual_add_" + std::to_string(i));
    const std::string entry = ".entry residual_add(";
    const std::size_t at = ptx.find(entry);
    if (at == std::string::npos) return std::nullopt;
    std::vector<std::string> cubins(static_cast<std::size_t>(count));
    std::atomic<int> next{0};
    std::atomic<bool> ok{true};
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < std::max(1u, std::thread::hardware_concurrency()); ++t) {
        pool.emplace_back([&] {
            for (int i = next++; i < count && ok; i = next++) {
                const auto n = static_cast<std::size_t>(i);
                std::string renamed = ptx;
                renamed.replace(at, entry.size(), ".entry " + names[n] + "(");
                auto compiled = compile::link_ptx(renamed, target);
                if (!compiled) {
                    ok = false;
                } else {
                    cubins[n] = std::move(compiled->cubin);
                }
            }
        });
    }
    for (auto& thread : pool) thread.join();
    if (!ok) return std::nullopt;
    return cubins;
}

}  // namespace

std::string run_module_churn(const std::vector<int>& counts, std::string& note) {
    std::optional<OpenGpu> gpu = open_gpu(note);
    if (!gpu) return {};
    const driver::CudaApi& cu = gpu->cu;
    const compile::Target target{gpu->context.info().arch};
    const std::string ptx = examples::residual_add_ptx();
    auto compiled = compile::link_ptx(ptx, target);
    if (!compiled) {
        note = compiled.error().message();
        return {};
    }
    const std::vector<std::string> one_cubin = {compiled->cubin};
    const std::vector<std::string> one_name = {"residual_add"};
    std::string text;
    append(text,
           "Device: %s. N modules loaded into one context, then every module unloaded; "
           "microseconds per module, each row a context of its own. `one cubin`: residual_add's "
           "(%zu bytes) N times; `a cubin each`: residual_add under N names, each linked apart; "
           "`+ lookup`: cuModuleGetFunction after each load.\n\n"
           "| modules | loaded | unloaded | load | load, the last tenth | unload | unload, the "
           "first tenth | unload, the last tenth |\n|---:|---|---|---:|---:|---:|---:|---:|\n",
           gpu->context.info().name.c_str(), compiled->cubin.size());
    for (const int count : counts) {
        const int n = std::max(count, 1);
        std::vector<std::string> names;
        const auto distinct = distinct_cubins(ptx, n, target, names);
        if (!distinct) {
            note = "the distinct cubins did not link";
            return text;
        }
        struct Row {
            const char* what;
            Fill fill;
            Order order;
        };
        const Row rows[] = {
            {"one cubin", {&one_cubin, &one_name, false}, Order::kLoaded},
            {"one cubin", {&one_cubin, &one_name, false}, Order::kReversed},
            {"one cubin", {&one_cubin, &one_name, false}, Order::kShuffled},
            {"one cubin", {&one_cubin, &one_name, false}, Order::kContextEnd},
            {"one cubin + lookup", {&one_cubin, &one_name, true}, Order::kLoaded},
            {"a cubin each", {&*distinct, &names, false}, Order::kLoaded},
            {"a cubin each + lookup", {&*distinct, &names, true}, Order::kLoaded},
            {"a cubin each + lookup", {&*distinct, &names, true}, Order::kReversed},
            {"a cubin each + lookup", {&*distinct, &names, true}, Order::kContextEnd},
        };
        for (const Row& row : rows) {
            const auto run = churn(cu, row.fill, n, row.order);
            if (!run) {
                note = "a load or unload failed at " + std::to_string(n) + " modules";
                return text;
            }
            if (row.order == Order::kContextEnd) {
                append(text, "| %d | %s | %s | %.2f | %.2f | %.2f | | |\n", n, row.what,
                       order_name(row.order), run->load_us, run->load_last_us, run->unload_us);
            } else {
                append(text, "| %d | %s | %s | %.2f | %.2f | %.2f | %.2f | %.2f |\n", n, row.what,
                       order_name(row.order), run->load_us, run->load_last_us, run->unload_us,
                       run->unload_first_us, run->unload_last_us);
            }
        }
    }
    text += "\n";
    return text;
}

}  // namespace kcache::bench
