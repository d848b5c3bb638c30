// SPDX-License-Identifier: Apache-2.0
// Launch cost on a real GPU: a raw cuLaunchKernel against launching through a KernelHandle, by
// key through kcache, and through the seed model (module mutex held through the launch).
#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <thread>

#include "bench/bench.hpp"
#include "bench/seed_model.hpp"
#include "driver/cuda_api.hpp"
#include "driver/device_memory.hpp"
#include "kcache/kernel_cache.hpp"
#include "ptx_kernels.hpp"
#include "testing/fake_driver.hpp"

namespace kcache::bench {

std::vector<LaunchRow> run_launch_overhead(int per_block, int blocks,
                                           const std::vector<int>& threads, std::string& note) {
    const auto& api_result = driver::cuda_api();
    if (!api_result) {
        note = api_result.error().message();
        return {};
    }
    const driver::CudaApi& cu = *api_result.value();
    auto context = driver::PrimaryContext::open(0);
    if (!context) {
        note = context.error().message();
        return {};
    }
    const std::string ptx = examples::residual_add_ptx();
    const std::string key = "residual_add:0";

    // Raw: the caller holds a CUfunction from a module it loaded itself.
    CUmodule module = nullptr;
    CUfunction raw = nullptr;
    if (cu.cuModuleLoadData(&module, ptx.c_str()) != CUDA_SUCCESS ||
        cu.cuModuleGetFunction(&raw, module, "residual_add") != CUDA_SUCCESS) {
        note = "raw module load failed";
        return {};
    }
    KernelCache cache(CacheOptions{});
    auto make = [&] { return Source::ptx(ptx); };
    auto handle = cache.kernel(key, make, "residual_add");
    SeedModelCache seed(driver::default_driver());
    if (!handle) {
        note = handle.error().describe();
        return {};
    }

    // n = 0: every launch is real but does no work, so host-side cost dominates.
    std::uint64_t out = 0, a = 0, b = 0;
    std::uint32_t n = 0;
    void* args[] = {&out, &a, &b, &n};
    LaunchConfig config;
    config.block.x = 32;

    auto raw_launch = [&](CUstream stream) {
        return cu.cuLaunchKernel(raw, 1, 1, 1, 32, 1, 1, 0, stream, args, nullptr) == CUDA_SUCCESS;
    };
    // The same launch with the library's CUkernel instead of a CUfunction: what the driver itself
    // charges for resolving a context-independent kernel, apart from anything kcache does.
    CUlibrary library = nullptr;
    CUkernel raw_kernel = nullptr;
    if (cu.cuLibraryLoadData(&library, ptx.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0) !=
            CUDA_SUCCESS ||
        cu.cuLibraryGetKernel(&raw_kernel, library, "residual_add") != CUDA_SUCCESS) {
        note = "raw library load failed";
        return {};
    }
    auto raw_kernel_launch = [&](CUstream stream) {
        return cu.cuLaunchKernel(reinterpret_cast<CUfunction>(raw_kernel), 1, 1, 1, 32, 1, 1, 0,
                                 stream, args, nullptr) == CUDA_SUCCESS;
    };
    // The raw launch after the one driver call a handle makes to tell whether the current
    // context is its code's home (CudaCode::at_home): what that check costs alone.
    auto checked_raw_launch = [&](CUstream stream) {
        unsigned long long id = 0;
        if (cu.cuCtxGetId == nullptr || cu.cuCtxGetId(nullptr, &id) != CUDA_SUCCESS) return false;
        return raw_launch(stream);
    };
    auto handle_launch = [&](CUstream stream) {
        LaunchConfig c = config;
        c.stream = stream;
        return handle->launch(c, args).ok();
    };
    auto key_launch = [&](CUstream stream) {
        LaunchConfig c = config;
        c.stream = stream;
        return cache.launch(key, make, "residual_add", c, args).ok();
    };
    auto seed_launch = [&](CUstream stream) {
        LaunchConfig c = config;
        c.stream = stream;
        return seed.compile_lock_launch(key, ptx, "residual_add", c, args).ok();
    };
    struct Method {
        const char* name;
        std::function<bool(CUstream)> launch;
    };
    const std::vector<Method> methods = {{"raw cuLaunchKernel", raw_launch},
                                         {"raw cuLaunchKernel on a CUkernel", raw_kernel_launch},
                                         {"raw cuCtxGetId + cuLaunchKernel", checked_raw_launch},
                                         {"KernelHandle::launch", handle_launch},
                                         {"kcache launch by key", key_launch},
                                         {"seed model compile_lock_launch", seed_launch}};
    for (const auto& m : methods) {  // warm every path once
        if (!m.launch(nullptr)) {
            note = std::string("launch failed: ") + m.name;
            return {};
        }
    }
    cu.cuCtxSynchronize();

    std::vector<LaunchRow> rows;
    for (int t : threads) {
        std::vector<std::vector<double>> samples(methods.size());
        for (int block = 0; block < blocks; ++block) {
            // Interleaved: every method gets the same conditions, block by block.
            for (std::size_t m = 0; m < methods.size(); ++m) {
                std::barrier start(t + 1);
                std::vector<std::thread> pool;
                pool.reserve(static_cast<std::size_t>(t));
                std::vector<double> per_thread(static_cast<std::size_t>(t));
                for (int i = 0; i < t; ++i) {
                    pool.emplace_back([&, i] {
                        (void)context->make_current();
                        CUstream stream = nullptr;
                        cu.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING);
                        start.arrive_and_wait();
                        const auto begin = std::chrono::steady_clock::now();
                        for (int k = 0; k < per_block; ++k) methods[m].launch(stream);
                        const auto end = std::chrono::steady_clock::now();
                        per_thread[static_cast<std::size_t>(i)] =
                            std::chrono::duration<double, std::nano>(end - begin).count() /
                            per_block;
                        cu.cuStreamSynchronize(stream);
                        cu.cuStreamDestroy(stream);
                    });
                }
                start.arrive_and_wait();
                for (auto& thread : pool) thread.join();
                double sum = 0;
                for (double v : per_thread) sum += v;
                samples[m].push_back(sum / t);
            }
        }
        const double base = median(samples[0]);
        for (std::size_t m = 0; m < methods.size(); ++m) {
            const double value = median(samples[m]);
            rows.push_back({methods[m].name, t, value, value / base, methods[0].name});
        }
    }
    cu.cuModuleUnload(module);
    cu.cuLibraryUnload(library);
    return rows;
}

namespace {

// The fake driver with a launch that does nothing, so that what is left is what kcache adds.
class NoOpLaunchDriver final : public driver::Driver {
public:
    std::string describe() const override { return "fake driver, no-op launch"; }
    Result<int> current_arch() override { return fake_.current_arch(); }
    int uniform_arch() const noexcept override { return 90; }
    Result<driver::ModuleId> load_module(const Source& source) override {
        return fake_.load_module(source);
    }
    Result<driver::ModuleId> load_binary(driver::Image image, driver::ImageSource again) override {
        return fake_.load_binary(std::move(image), std::move(again));
    }
    void unload_module(driver::ModuleId module) noexcept override { fake_.unload_module(module); }
    Result<driver::KernelId> get_kernel(driver::ModuleId module, const std::string& name) override {
        return fake_.get_kernel(module, name);
    }
    Result<std::vector<driver::KernelParam>> kernel_params(driver::KernelId kernel) override {
        return fake_.kernel_params(kernel);
    }
    Result<void> launch(driver::KernelId, const LaunchConfig&, void**) override { return ok(); }
    Result<void*> native_kernel(driver::KernelId kernel) override {
        return fake_.native_kernel(kernel);
    }

private:
    fakes::FakeDriver fake_;
};

}  // namespace

std::vector<LaunchRow> run_launch_overhead_fake(int per_block, int blocks, std::string& note) {
    auto driver = std::make_shared<NoOpLaunchDriver>();
    CacheOptions options;
    options.driver = driver;
    KernelCache cache(options);
    const std::string ptx = examples::residual_add_ptx();
    auto handle = cache.kernel(
        "residual_add:0", [&] { return Source::ptx(ptx); }, "residual_add");
    if (!handle) {
        note = handle.error().describe();
        return {};
    }
    auto native = handle->native_kernel();  // the fake's kernel id, as a pointer
    if (!native) {
        note = native.error().describe();
        return {};
    }
    const driver::KernelId id(*native);
    // Through a pointer the compiler cannot see through: a virtual call, as the handle makes.
    driver::Driver* raw = driver.get();
    asm volatile("" : "+r"(raw));
    std::uint64_t out = 0, a = 0, b = 0;
    std::uint32_t n = 0;
    void* args[] = {&out, &a, &b, &n};
    LaunchConfig config;
    config.block.x = 32;
    const std::function<bool()> methods[] = {
        [&] { return raw->launch(id, config, args).ok(); },
        [&] { return handle->launch(config, args).ok(); },
    };
    const char* const names[] = {"driver launch, called directly", "KernelHandle::launch"};
    std::vector<double> samples[2];
    for (int block = 0; block < blocks; ++block) {
        for (int m = 0; m < 2; ++m) {  // interleaved, block by block
            const auto begin = std::chrono::steady_clock::now();
            bool all = true;
            for (int k = 0; k < per_block; ++k) all = methods[m]() && all;
            const auto end = std::chrono::steady_clock::now();
            if (!all) {
                note = std::string("launch failed: ") + names[m];
                return {};
            }
            samples[m].push_back(std::chrono::duration<double, std::nano>(end - begin).count() /
                                 per_block);
        }
    }
    std::vector<LaunchRow> rows;
    const double base = median(samples[0]);
    for (int m = 0; m < 2; ++m) {
        const double value = median(samples[m]);
        rows.push_back({names[m], 1, value, value / base, names[0]});
    }
    return rows;
}

std::string format_launch(const std::vector<LaunchRow>& rows) {
    if (rows.empty()) return "launch: no result\n";
    std::string out = "| threads | method | ns per launch (host) | vs " + rows.front().baseline +
                      " |\n|---:|---|---:|---:|\n";
    for (const auto& row : rows) {
        char line[200];
        std::snprintf(line, sizeof line, "| %d | %s | %.1f | %.3fx |\n", row.threads,
                      row.method.c_str(), row.ns_per_launch, row.ratio);
        out += line;
    }
    return out;
}

}  // namespace kcache::bench
