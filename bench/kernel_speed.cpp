// SPDX-License-Identifier: Apache-2.0
// How fast the kernels kcache compiles run, against the same PTX compiled by the driver's JIT
// (what users had before). nvJitLink compiles PTX as relocatable code and then links it, where the
// driver's JIT compiles the whole program; the instructions differ (see the README), and this is
// whether it matters on the device. GPU time per launch from events, blocks alternating sides.
#include <cstdio>
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

constexpr int kBlocks = 7;             // median of, sides alternating
constexpr int kLaunchesPerBlock = 20;  // timed together between two events

struct Case {
    std::string what;
    std::string ptx;
    std::string entry;
    std::uint32_t threads;                 // the grid covers this many threads, 256 a block
    std::vector<std::uint32_t> buffers_n;  // float buffers, by element count
    std::uint32_t n;                       // the last (u32) parameter
};

// GPU milliseconds per launch of a function, over one block of launches; owns its events.
struct Timer {
    const driver::CudaApi& cu;
    CUevent start = nullptr, stop = nullptr;

    explicit Timer(const driver::CudaApi& api) : cu(api) {}
    Timer(const Timer&) = delete;
    Timer& operator=(const Timer&) = delete;
    ~Timer() {
        if (start != nullptr) (void)cu.cuEventDestroy(start);
        if (stop != nullptr) (void)cu.cuEventDestroy(stop);
    }

    // The driver's error for the first call that failed: a failed launch must not pass for a
    // fast one.
    Result<double> block_ms(CUfunction function, const Case& c, void** args) const {
        const unsigned blocks = (c.threads + 255) / 256;
        CUresult rc = cu.cuEventRecord(start, nullptr);
        for (int i = 0; i < kLaunchesPerBlock && rc == CUDA_SUCCESS; ++i) {
            rc = cu.cuLaunchKernel(function, blocks, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr);
        }
        float ms = 0;
        if (rc == CUDA_SUCCESS) rc = cu.cuEventRecord(stop, nullptr);
        if (rc == CUDA_SUCCESS) rc = cu.cuEventSynchronize(stop);
        if (rc == CUDA_SUCCESS) rc = cu.cuEventElapsedTime(&ms, start, stop);
        if (rc != CUDA_SUCCESS) return cu.error(Errc::kDriverError, "timing " + c.entry, rc);
        return double{ms} / kLaunchesPerBlock;
    }
};

// A module unloaded when it goes.
struct Module {
    const driver::CudaApi& cu;
    CUmodule module = nullptr;
    explicit Module(const driver::CudaApi& api) : cu(api) {}
    Module(const Module&) = delete;
    Module& operator=(const Module&) = delete;
    ~Module() {
        if (module != nullptr) (void)cu.cuModuleUnload(module);
    }
};

}  // namespace

std::string run_kernel_speed(std::string& note) {
    std::optional<OpenGpu> gpu = open_gpu(note);
    if (!gpu) return {};
    const driver::CudaApi& cu = gpu->cu;
    const int arch = gpu->context.info().arch;
    constexpr std::uint32_t kElements = 1u << 24;
    constexpr std::uint32_t kRows = 1u << 15;
    const std::vector<Case> cases = {
        {"residual_add, 16M floats",
         examples::residual_add_ptx(),
         "residual_add",
         kElements,
         {kElements, kElements, kElements},
         kElements},
        {"gelu, 16M floats",
         examples::gelu_ptx(),
         "gelu",
         kElements,
         {kElements, kElements},
         kElements},
        {"softmax_rows, 32768 rows of 1024",
         examples::softmax_rows_ptx(1024),
         "softmax_rows",
         kRows,
         {kRows * 1024, kRows * 1024},
         kRows},
    };
    Timer timer(cu);
    if (cu.cuEventCreate(&timer.start, CU_EVENT_DEFAULT) != CUDA_SUCCESS ||
        cu.cuEventCreate(&timer.stop, CU_EVENT_DEFAULT) != CUDA_SUCCESS) {
        note = "could not create events";
        return {};
    }
    std::string text =
        "| kernel (sm_" + std::to_string(arch) +
        "), GPU ms per launch, median of 7 blocks of 20 | driver JIT (whole program) | kcache "
        "(nvJitLink, relocatable + link) | kcache / driver JIT |\n|---|---:|---:|---:|\n";
    for (const Case& c : cases) {
        auto linked = compile::link_ptx(c.ptx, compile::Target{arch, false});
        if (!linked) {
            note = linked.error().describe();
            return {};
        }
        Module jit_module{cu}, kcache_module{cu};
        CUfunction jit = nullptr, kcache = nullptr;
        if (cu.cuModuleLoadData(&jit_module.module, c.ptx.c_str()) != CUDA_SUCCESS ||
            cu.cuModuleGetFunction(&jit, jit_module.module, c.entry.c_str()) != CUDA_SUCCESS ||
            cu.cuModuleLoadData(&kcache_module.module, linked->cubin.data()) != CUDA_SUCCESS ||
            cu.cuModuleGetFunction(&kcache, kcache_module.module, c.entry.c_str()) !=
                CUDA_SUCCESS) {
            note = "could not load " + c.entry;
            return {};
        }
        std::vector<driver::DeviceBuffer> buffers;
        std::vector<std::uint64_t> addresses;
        for (std::uint32_t count : c.buffers_n) {
            auto buffer = driver::DeviceBuffer::allocate(std::size_t{count} * sizeof(float));
            if (!buffer || !buffer->upload(std::vector<float>(count, 0.25f))) {
                note = "device memory";
                return {};
            }
            addresses.push_back(buffer->address());
            buffers.push_back(std::move(*buffer));
        }
        std::uint32_t n = c.n;
        std::vector<void*> args;
        args.reserve(addresses.size() + 1);
        for (auto& address : addresses) args.push_back(&address);
        args.push_back(&n);
        std::vector<double> jit_ms, kcache_ms;
        // Block -1 warms both and is not kept; then the sides alternate which goes first.
        for (int block = -1; block < kBlocks; ++block) {
            const bool jit_first = block % 2 == 0;
            auto first = timer.block_ms(jit_first ? jit : kcache, c, args.data());
            auto second = first ? timer.block_ms(jit_first ? kcache : jit, c, args.data())
                                : Result<double>(first.error());
            if (!second) {
                note = second.error().describe();
                return {};
            }
            if (block < 0) continue;
            (jit_first ? jit_ms : kcache_ms).push_back(*first);
            (jit_first ? kcache_ms : jit_ms).push_back(*second);
        }
        char line[512];
        std::snprintf(line, sizeof line, "| %s | %.4f | %.4f | %.3fx |\n", c.what.c_str(),
                      median(jit_ms), median(kcache_ms), median(kcache_ms) / median(jit_ms));
        text += line;
    }
    return text;
}

}  // namespace kcache::bench
