// How fast the kernels kcache compiles run, against the same PTX compiled by the driver's JIT
// (what users had before). nvJitLink compiles PTX as relocatable code and then links it, where the
// driver's JIT compiles the whole program; the instructions differ (see the README), and this is
// whether it matters on the device. GPU time per launch from events, blocks alternating sides.
#include <cstdio>
#include <string>
#include <vector>

#include "bench/bench.hpp"
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

// GPU milliseconds per launch of `function`, median over blocks; `args` as cuLaunchKernel takes.
struct Timer {
    const driver::CudaApi& cu;
    CUevent start = nullptr, stop = nullptr;

    double block_ms(CUfunction function, const Case& c, void** args) const {
        const unsigned blocks = (c.threads + 255) / 256;
        cu.cuEventRecord(start, nullptr);
        for (int i = 0; i < kLaunchesPerBlock; ++i) {
            cu.cuLaunchKernel(function, blocks, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr);
        }
        cu.cuEventRecord(stop, nullptr);
        cu.cuEventSynchronize(stop);
        float ms = 0;
        cu.cuEventElapsedTime(&ms, start, stop);
        return ms / kLaunchesPerBlock;
    }
};

}  // namespace

std::string run_kernel_speed(std::string& note) {
    const auto& api = driver::cuda_api();
    if (!api) {
        note = api.error().message();
        return {};
    }
    const driver::CudaApi& cu = **api;
    auto context = driver::PrimaryContext::open(0);
    if (!context || !context->make_current()) {
        note = "no CUDA context";
        return {};
    }
    const int arch = context->info().arch;
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
    Timer timer{cu};
    cu.cuEventCreate(&timer.start, CU_EVENT_DEFAULT);
    cu.cuEventCreate(&timer.stop, CU_EVENT_DEFAULT);
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
        CUmodule jit_module = nullptr, kcache_module = nullptr;
        CUfunction jit = nullptr, kcache = nullptr;
        if (cu.cuModuleLoadData(&jit_module, c.ptx.c_str()) != CUDA_SUCCESS ||
            cu.cuModuleGetFunction(&jit, jit_module, c.entry.c_str()) != CUDA_SUCCESS ||
            cu.cuModuleLoadData(&kcache_module, linked->cubin.data()) != CUDA_SUCCESS ||
            cu.cuModuleGetFunction(&kcache, kcache_module, c.entry.c_str()) != CUDA_SUCCESS) {
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
        for (auto& address : addresses) args.push_back(&address);
        args.push_back(&n);
        (void)timer.block_ms(jit, c, args.data());  // warm both
        (void)timer.block_ms(kcache, c, args.data());
        std::vector<double> jit_ms, kcache_ms;
        for (int block = 0; block < kBlocks; ++block) {
            if (block % 2 == 0) {
                jit_ms.push_back(timer.block_ms(jit, c, args.data()));
                kcache_ms.push_back(timer.block_ms(kcache, c, args.data()));
            } else {
                kcache_ms.push_back(timer.block_ms(kcache, c, args.data()));
                jit_ms.push_back(timer.block_ms(jit, c, args.data()));
            }
        }
        char line[512];
        std::snprintf(line, sizeof line, "| %s | %.4f | %.4f | %.3fx |\n", c.what.c_str(),
                      median(jit_ms), median(kcache_ms), median(kcache_ms) / median(jit_ms));
        text += line;
        cu.cuModuleUnload(jit_module);
        cu.cuModuleUnload(kcache_module);
    }
    cu.cuEventDestroy(timer.start);
    cu.cuEventDestroy(timer.stop);
    return text;
}

}  // namespace kcache::bench
