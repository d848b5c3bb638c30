// SPDX-License-Identifier: Apache-2.0
// The driver's own cost per module as one context holds more of them: N modules loaded
// (cuModuleLoadData) into a context of its own, each one small cubin again or each a cubin of its
// own (the same kernel under another name; or softmax_rows at N row lengths, under one name or N),
// its kernel looked up (cuModuleGetFunction) or not; then every module unloaded (cuModuleUnload) in
// the order they were loaded, in the reverse order or shuffled, or none unloaded and the context
// destroyed with them (cuCtxDestroy). How a load's cost grows with the modules loaded before it,
// what in it grows, and whether the order a cache's end unloads in matters. No kcache code is
// timed.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
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

// The scale curve's first row length (bench/scale.cpp): the same kernels.
constexpr int kFirstCols = 1000;

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

// `count` cubins, the i-th linked from `ptx_of(i)`, on every core.
std::optional<std::vector<std::string>> link_each(int count, const compile::Target& target,
                                                  const std::function<std::string(int)>& ptx_of) {
    std::vector<std::string> cubins(static_cast<std::size_t>(count));
    std::atomic<int> next{0};
    std::atomic<bool> ok{true};
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < std::max(1u, std::thread::hardware_concurrency()); ++t) {
        pool.emplace_back([&] {
            for (int i = next++; i < count && ok; i = next++) {
                auto compiled = compile::link_ptx(ptx_of(i), target);
                if (!compiled) {
                    ok = false;
                } else {
                    cubins[static_cast<std::size_t>(i)] = std::move(compiled->cubin);
                }
            }
        });
    }
    for (auto& thread : pool) thread.join();
    if (!ok) return std::nullopt;
    return cubins;
}

std::vector<std::string> numbered(const std::string& name, int count) {
    std::vector<std::string> names;
    names.reserve(static_cast<std::size_t>(count));
    for (int i = 0; i < count; ++i) names.push_back(name + "_" + std::to_string(i));
    return names;
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
    const std::vector<std::string> softmax_one = {"softmax_rows"};
    std::string text;
    append(text,
           "Device: %s. N modules loaded into one context, then every module unloaded; "
           "microseconds per module, each row a context of its own. `one cubin`: residual_add's "
           "(%zu bytes) N times; `a cubin each`: residual_add under N names, each linked apart; "
           "`softmax_rows`: the scale curve's kernel at N row lengths, its entry named alike or "
           "apart; `+ lookup`: cuModuleGetFunction after each load.\n\n"
           "| modules | loaded | unloaded | load | load, the last tenth | unload | unload, the "
           "first tenth | unload, the last tenth |\n|---:|---|---|---:|---:|---:|---:|---:|\n",
           gpu->context.info().name.c_str(), compiled->cubin.size());
    for (const int count : counts) {
        const int n = std::max(count, 1);
        // residual_add under N names; softmax_rows at N row lengths (as the scale curve's
        // kernels), under its one name and under N.
        const std::vector<std::string> names = numbered("residual_add", n);
        const std::size_t entry = ptx.find(".entry residual_add(");
        if (entry == std::string::npos) {
            note = "residual_add's PTX has no entry";
            return text;
        }
        const auto distinct = link_each(n, target, [&](int i) {
            std::string renamed = ptx;
            renamed.replace(entry + 7, 12, names[static_cast<std::size_t>(i)]);
            return renamed;
        });
        const std::vector<std::string> softmax_names = numbered("softmax_rows", n);
        const auto softmax_one_name =
            link_each(n, target, [](int i) { return examples::softmax_rows_ptx(kFirstCols + i); });
        const auto softmax_renamed = link_each(n, target, [&](int i) {
            return examples::softmax_rows_ptx(kFirstCols + i,
                                              softmax_names[static_cast<std::size_t>(i)]);
        });
        if (!distinct || !softmax_one_name || !softmax_renamed) {
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
            {"softmax_rows, a cubin each, one name + lookup",
             {&*softmax_one_name, &softmax_one, true},
             Order::kLoaded},
            {"softmax_rows, a cubin each, renamed + lookup",
             {&*softmax_renamed, &softmax_names, true},
             Order::kLoaded},
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
