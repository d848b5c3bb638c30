// SPDX-License-Identifier: Apache-2.0
// GPU tests: the real driver on a real device. Each test skips cleanly where there is no GPU
// (CI); scripts/gpu-check.sh runs them on the H200.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <latch>
#include <random>
#include <thread>

#include "../cpu/test_support.hpp"
#include "build/bundle.hpp"
#include "cache/warm_up_bundles.hpp"
#include "compile/compiler.hpp"
#include "compile/ptx_params.hpp"
#include "driver/compiler_api.hpp"
#include "driver/cuda_api.hpp"
#include "driver/device_memory.hpp"
#include "kcache/kernel_cache.hpp"
#include "ptx_kernels.hpp"
#include "store/artifact_format.hpp"
#include "testing/redis_server.hpp"
#include "util/epoch.hpp"

namespace kcache {
namespace {

// The bundles (build/bundle.hpp) stored in a disk directory.
// A warm-up that planned bundles keeps one record of them (build/warm_up_record.hpp).
constexpr std::size_t kWarmUpRecords = 1;

std::size_t bundle_entries(const std::string& directory) {
    std::size_t bundles = 0;
    for (const auto& file : test::entry_files(directory)) {
        auto entry = store::decode(test::read_file(file.string()));
        bundles += entry && entry->key.source_kind == build::kBundleSourceKind ? 1 : 0;
    }
    return bundles;
}

class GpuTest : public ::testing::Test {
protected:
    void SetUp() override {
        auto devices = driver::device_count();
        if (!devices) GTEST_SKIP() << "no GPU: " << devices.error().message();
        auto opened = driver::PrimaryContext::open(0);
        ASSERT_TRUE(opened.ok()) << opened.error().describe();
        context_ = std::make_unique<driver::PrimaryContext>(std::move(*opened));
    }

    static std::vector<float> random_floats(std::size_t n, unsigned seed, float scale = 3.0f) {
        std::mt19937 rng(seed);
        std::normal_distribution<float> dist(0.0f, scale);
        std::vector<float> out(n);
        for (float& v : out) v = dist(rng);
        return out;
    }

    static driver::DeviceBuffer upload(const std::vector<float>& data) {
        auto buffer = driver::DeviceBuffer::allocate(data.size() * sizeof(float));
        EXPECT_TRUE(buffer.ok());
        EXPECT_TRUE(buffer->upload(data).ok());
        return std::move(*buffer);
    }

    // Poisoned, so an element the kernel never wrote cannot pass.
    static driver::DeviceBuffer poisoned(std::size_t n) {
        return upload(std::vector<float>(n, std::nanf("")));
    }

    static void expect_close(const std::vector<float>& got, const std::vector<float>& want,
                             double tolerance) {
        ASSERT_GE(got.size(), want.size());
        for (std::size_t i = 0; i < want.size(); ++i) {
            ASSERT_LE(std::fabs(double(got[i]) - want[i]), tolerance * std::fabs(want[i]) + 1e-6)
                << "element " << i << ": got " << got[i] << ", want " << want[i];
        }
    }

    static LaunchConfig linear(std::uint32_t n) {
        LaunchConfig config;
        config.block.x = 128;
        config.grid.x = (n + 127) / 128;
        return config;
    }

    // softmax_rows for each of `widths` columns, keyed by its width.
    static std::vector<WarmUpItem> softmax_items(const std::vector<int>& widths) {
        std::vector<WarmUpItem> items;
        items.reserve(widths.size());
        for (int cols : widths) {
            items.push_back({"softmax:" + std::to_string(cols),
                             [cols]() -> Result<Source> {
                                 return Source::ptx(examples::softmax_rows_ptx(cols));
                             },
                             "softmax_rows"});
        }
        return items;
    }

    // A disk tier in `temp`, bundles on whatever the environment says.
    static CacheOptions with_bundles(const test::TempDir& temp) {
        CacheOptions options;
        options.disk_directory = temp.path() + "/cache";
        options.bundle_warm_ups = true;
        return options;
    }

    // Softmax kernels of the row lengths `widths` (results[i] of widths[i]), each launched on 33
    // random rows (from `seed`) and held to the CPU reference.
    void expect_softmax_rows(const std::vector<Result<KernelHandle>>& results,
                             const std::vector<int>& widths, unsigned seed) {
        ASSERT_EQ(results.size(), widths.size());
        for (std::size_t i = 0; i < results.size(); ++i) {
            ASSERT_TRUE(results[i].ok()) << results[i].error().describe();
            const int cols = widths[i], rows = 33;
            auto in = random_floats(static_cast<std::size_t>(rows * cols),
                                    seed + static_cast<unsigned>(i));
            auto din = upload(in), dout = poisoned(in.size());
            const auto r = static_cast<std::uint32_t>(rows);
            ASSERT_TRUE(results[i]->launch_with(linear(r), dout.address(), din.address(), r).ok());
            ASSERT_TRUE(context_->synchronize().ok());
            expect_close(*dout.download_floats(), examples::softmax_rows_ref(in, rows, cols), 1e-4);
        }
    }

    std::unique_ptr<driver::PrimaryContext> context_;
};

Source residual_add_source() {
    return Source::ptx(examples::residual_add_ptx());
}

// residual_add as a cubin for `arch` (nvJitLink): the cache then asks the driver for its
// parameters, where it reads a PTX source's own declarations.
Result<Source> residual_add_cubin(int arch) {
    auto linked = compile::link_ptx(examples::residual_add_ptx(), compile::Target{arch, false});
    if (!linked) return std::move(linked).error();
    return Source::cubin(std::move(linked->cubin));
}

TEST_F(GpuTest, ResidualAddMatchesCpuReference) {
    KernelCache cache;
    const std::uint32_t n = 100003;  // not a multiple of the block: exercises the bound check
    auto a = random_floats(n, 1), b = random_floats(n, 2);
    auto da = upload(a), db = upload(b), dout = poisoned(n);
    auto kernel = cache.kernel("residual_add:100003", residual_add_source, "residual_add");
    ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
    auto launched = kernel->launch_with(linear(n), dout.address(), da.address(), db.address(), n);
    ASSERT_TRUE(launched.ok()) << launched.error().describe();
    ASSERT_TRUE(context_->synchronize().ok());
    expect_close(*dout.download_floats(), examples::residual_add_ref(a, b), 0);
}

TEST_F(GpuTest, SoftmaxRowsMatchesCpuReferenceForEachShapeKey) {
    KernelCache cache;
    for (int cols : {32, 1000, 1500}) {
        const int rows = 67;
        auto in = random_floats(static_cast<std::size_t>(rows * cols), static_cast<unsigned>(cols));
        auto din = upload(in), dout = poisoned(in.size());
        auto kernel = cache.kernel(
            "softmax:" + std::to_string(cols),
            [&] { return Source::ptx(examples::softmax_rows_ptx(cols)); }, "softmax_rows");
        ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
        const auto r = static_cast<std::uint32_t>(rows);
        ASSERT_TRUE(kernel->launch_with(linear(r), dout.address(), din.address(), r).ok());
        ASSERT_TRUE(context_->synchronize().ok());
        expect_close(*dout.download_floats(), examples::softmax_rows_ref(in, rows, cols), 1e-4);
    }
    EXPECT_EQ(cache.stats().compiles, 3u);
}

TEST_F(GpuTest, GeluMatchesCpuReference) {
    KernelCache cache;
    const std::uint32_t n = 65537;
    auto in = random_floats(n, 7);
    auto din = upload(in), dout = poisoned(n);
    auto kernel = cache.kernel(
        "gelu:65537", [] { return Source::ptx(examples::gelu_ptx()); }, "gelu");
    ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
    ASSERT_TRUE(kernel->launch_with(linear(n), dout.address(), din.address(), n).ok());
    ASSERT_TRUE(context_->synchronize().ok());
    expect_close(*dout.download_floats(), examples::gelu_ref(in), 1e-4);
}

TEST_F(GpuTest, DriverReportsParameterLayout) {
    if (!driver::nvjitlink_api().ok()) GTEST_SKIP() << driver::nvjitlink_api().error().describe();
    KernelCache cache;
    const int arch = context_->info().arch;
    auto kernel = cache.kernel(
        "residual_add:cubin", [arch] { return residual_add_cubin(arch); }, "residual_add");
    ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
    EXPECT_EQ(kernel->param_count(), 4);
}

// The parameter sizes kcache reads from a PTX source (instead of asking the driver) are the ones
// the driver reports for the kernel kcache loads: the cubin nvJitLink makes of that PTX.
TEST_F(GpuTest, ParameterSizesReadFromPtxAreTheDriversOwn) {
    if (!driver::nvjitlink_api().ok()) GTEST_SKIP() << driver::nvjitlink_api().error().describe();
    const compile::Target target{context_->info().arch, false};
    const std::string mixed =
        ".version 7.8\n.target sm_70\n.address_size 64\n"
        ".visible .entry mixed(\n"
        "\t.param .align 8 .b8 mixed_param_0[24],\n"
        "\t.param .u64 .ptr .global .align 16 mixed_param_1,\n"
        "\t.param .u8 mixed_param_2,\n"
        "\t.param .f64 mixed_param_3,\n"
        "\t.param .u16 mixed_param_4,\n"
        "\t.param .align 4 .b8 mixed_param_5[12],\n"
        "\t.param .f32 mixed_param_6\n"
        ")\n{\n\tret;\n}\n"
        ".visible .entry none()\n{\n\tret;\n}\n";
    const std::vector<std::string> sources = {examples::residual_add_ptx(), examples::gelu_ptx(),
                                              examples::softmax_rows_ptx(1000),
                                              examples::scale_ptx(), mixed};
    auto driver = driver::default_driver();
    std::size_t compared = 0;
    for (std::size_t index = 0; index < sources.size(); ++index) {
        SCOPED_TRACE("source " + std::to_string(index));
        const std::string& ptx = sources[index];
        const compile::PtxParamSizes declared = compile::ptx_param_sizes(ptx);
        ASSERT_FALSE(declared.empty());
        auto linked = compile::link_ptx(ptx, target);
        ASSERT_TRUE(linked.ok()) << linked.error().describe();
        auto library = driver->load_module(Source::cubin(std::move(linked->cubin)));
        ASSERT_TRUE(library.ok()) << library.error().describe();
        for (const auto& [name, sizes] : declared) {
            SCOPED_TRACE(name);
            auto kernel = driver->get_kernel(*library, name);
            ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
            auto params = driver->kernel_params(*kernel);
            ASSERT_TRUE(params.ok()) << params.error().describe();
            std::vector<std::size_t> reported;
            for (const auto& param : *params) reported.push_back(param.size);
            EXPECT_EQ(reported, sizes);
            ++compared;
        }
        driver->unload_module(*library);
    }
    EXPECT_EQ(compared, 6u);
}

TEST_F(GpuTest, TwoContextsOnOneDeviceShareOneEntry) {
    KernelCache cache;
    const std::uint32_t n = 4096;
    auto a = random_floats(n, 11), b = random_floats(n, 12);
    auto expected = examples::residual_add_ref(a, b);

    auto first = cache.kernel("residual_add:4096", residual_add_source, "residual_add");
    ASSERT_TRUE(first.ok()) << first.error().describe();
    {
        auto da = upload(a), db = upload(b), dout = poisoned(n);
        ASSERT_TRUE(
            first->launch_with(linear(n), dout.address(), da.address(), db.address(), n).ok());
        ASSERT_TRUE(context_->synchronize().ok());
        expect_close(*dout.download_floats(), expected, 0);
    }

    auto second_context = driver::OwnedContext::create(0);
    ASSERT_TRUE(second_context.ok()) << second_context.error().describe();
    ASSERT_TRUE(second_context->make_current().ok());
    {
        auto da = upload(a), db = upload(b), dout = poisoned(n);  // memory of the 2nd context
        auto second = cache.kernel("residual_add:4096", residual_add_source, "residual_add");
        ASSERT_TRUE(second.ok()) << second.error().describe();
        auto launched =
            second->launch_with(linear(n), dout.address(), da.address(), db.address(), n);
        ASSERT_TRUE(launched.ok()) << launched.error().describe();
        // The first handle, resolved in the first context, launches here too.
        ASSERT_TRUE(
            first->launch_with(linear(n), dout.address(), da.address(), db.address(), n).ok());
        expect_close(*dout.download_floats(), expected, 0);
    }
    EXPECT_EQ(cache.stats().compiles, 1u);
    EXPECT_EQ(cache.stats().entries, 1u);
    ASSERT_TRUE(context_->make_current().ok());
}

// The code is loaded as a module into the context that asked first (its home). When that context
// is destroyed, the entry still serves the next one (through a library), and unloading it later
// leaves the dead context's module alone.
TEST_F(GpuTest, AnEntryOutlivesTheContextThatLoadedIt) {
    KernelCache cache;
    const std::uint32_t n = 2048;
    auto a = random_floats(n, 13), b = random_floats(n, 14);
    const auto expected = examples::residual_add_ref(a, b);
    const void* home_address = nullptr;
    {
        auto home = driver::OwnedContext::create(0);
        ASSERT_TRUE(home.ok()) << home.error().describe();
        ASSERT_TRUE(home->make_current().ok());
        home_address = home->handle();
        auto kernel = cache.kernel("residual_add:2048", residual_add_source, "residual_add");
        ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
        auto da = upload(a), db = upload(b), dout = poisoned(n);
        ASSERT_TRUE(
            kernel->launch_with(linear(n), dout.address(), da.address(), db.address(), n).ok());
        expect_close(*dout.download_floats(), expected, 0);
    }  // buffers freed, then the home context destroyed
    ASSERT_TRUE(context_->make_current().ok());
    // The same context address may come back for a new context: only the ID tells them apart.
    // Reported, not asserted: whether the driver reuses it is its own business.
    bool reused = false;
    for (int round = 0; round < 4; ++round) {
        auto next = driver::OwnedContext::create(0);
        ASSERT_TRUE(next.ok()) << next.error().describe();
        ASSERT_TRUE(next->make_current().ok());
        reused = reused || next->handle() == home_address;
        auto kernel = cache.kernel("residual_add:2048", residual_add_source, "residual_add");
        ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
        auto da = upload(a), db = upload(b), dout = poisoned(n);
        auto launched =
            kernel->launch_with(linear(n), dout.address(), da.address(), db.address(), n);
        ASSERT_TRUE(launched.ok()) << launched.error().describe();
        expect_close(*dout.download_floats(), expected, 0);
    }
    ASSERT_TRUE(context_->make_current().ok());
    RecordProperty("dead_home_address_reused", reused ? "yes" : "no");
    std::printf("the dead home's context address was %sreused\n", reused ? "" : "not ");
    EXPECT_EQ(cache.stats().compiles, 1u);
    cache.clear();
    util::EpochDomain::global().synchronize();
    EXPECT_EQ(cache.stats().loaded_libraries, 0u);
}

// Argument checks need the kernel's parameters, asked at its first checked launch. When the
// context that loaded the module is gone by then, they are asked in the context at hand.
TEST_F(GpuTest, ArgumentChecksHoldAfterTheHomeContextIsDestroyed) {
    if (!driver::nvjitlink_api().ok()) GTEST_SKIP() << driver::nvjitlink_api().error().describe();
    KernelCache cache;
    KernelHandle kernel;
    const int arch = context_->info().arch;
    {
        auto home = driver::OwnedContext::create(0);
        ASSERT_TRUE(home.ok()) << home.error().describe();
        // A cubin: its parameters are asked of the driver, at the first checked launch.
        auto found = cache.kernel(
            "residual_add:99", [arch] { return residual_add_cubin(arch); }, "residual_add");
        ASSERT_TRUE(found.ok()) << found.error().describe();
        kernel = std::move(*found);  // resolved at home, never launched there
    }
    ASSERT_TRUE(context_->make_current().ok());
    const std::uint32_t n = 99;
    auto a = random_floats(n, 71), b = random_floats(n, 72);
    auto da = upload(a), db = upload(b), dout = poisoned(n);
    auto wrong = kernel.launch_with(linear(n), dout.address(), da.address(), db.address());
    ASSERT_FALSE(wrong.ok());
    EXPECT_EQ(wrong.error().code(), Errc::kArgumentMismatch) << wrong.error().describe();
    EXPECT_EQ(kernel.param_count(), 4);
    auto right = kernel.launch_with(linear(n), dout.address(), da.address(), db.address(), n);
    ASSERT_TRUE(right.ok()) << right.error().describe();
    expect_close(*dout.download_floats(), examples::residual_add_ref(a, b), 0);
}

// Kernels of one module that talk through a __device__ variable see one copy of it in each
// context, whichever context each kernel was first asked for in: the home context runs them all
// from its module, never some from a second copy of the code.
TEST_F(GpuTest, KernelsOfOneModuleShareTheirDeviceVariableInEveryContext) {
    if (!driver::nvrtc_identity().ok()) GTEST_SKIP() << driver::nvrtc_identity().error().describe();
    KernelCache cache;
    auto source = [] {
        return Source::cuda(
            "__device__ float shared_value;\n"
            "extern \"C\" __global__ void put_value(float v) { shared_value = v; }\n"
            "extern \"C\" __global__ void get_value(float* out) { *out = shared_value; }\n");
    };
    auto put = cache.kernel("device_variable", source, "put_value");  // loaded here: the home
    ASSERT_TRUE(put.ok()) << put.error().describe();
    auto other = driver::OwnedContext::create(0);
    ASSERT_TRUE(other.ok()) << other.error().describe();
    auto get = put->module().kernel("get_value");  // first asked for away from home
    ASSERT_TRUE(get.ok()) << get.error().describe();
    LaunchConfig one;
    auto round_trip = [&](float value) -> Result<float> {
        auto out = poisoned(1);
        if (auto r = put->launch_with(one, value); !r) return std::move(r).error();
        if (auto r = get->launch_with(one, out.address()); !r) return std::move(r).error();
        auto got = out.download_floats();
        if (!got) return std::move(got).error();
        return (*got)[0];
    };
    for (const bool at_home : {true, false, true}) {
        SCOPED_TRACE(at_home ? "home context" : "other context");
        ASSERT_TRUE((at_home ? context_->make_current() : other->make_current()).ok());
        const float value = at_home ? 42.0f : 7.0f;
        auto got = round_trip(value);
        ASSERT_TRUE(got.ok()) << got.error().describe();
        EXPECT_EQ(*got, value);
        EXPECT_EQ(put->param_count(), 1);
        EXPECT_EQ(get->param_count(), 1);
    }
    ASSERT_TRUE(context_->make_current().ok());
    EXPECT_EQ(cache.stats().compiles, 1u);
}

// A second kernel of a module, first asked for in another context than the one that loaded the
// module, launches there and back in the first; so does the first kernel in both.
TEST_F(GpuTest, KernelsOfOneModuleLaunchInEveryContextWhereverResolvedFirst) {
    if (!driver::nvrtc_identity().ok()) GTEST_SKIP() << driver::nvrtc_identity().error().describe();
    KernelCache cache;
    auto source = [] {
        return Source::cuda(
            "extern \"C\" __global__ void add_one(float* x, unsigned n) {\n"
            "    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i < n) x[i] += 1.0f;\n"
            "}\n"
            "extern \"C\" __global__ void times_two(float* x, unsigned n) {\n"
            "    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i < n) x[i] *= 2.0f;\n"
            "}\n");
    };
    auto add_one = cache.kernel("two_kernels", source, "add_one");  // loaded here: the home
    ASSERT_TRUE(add_one.ok()) << add_one.error().describe();
    const std::uint32_t n = 3000;
    const auto data = random_floats(n, 41);
    // x -> (x + 1) * 2, with each kernel launched in the context at hand.
    auto run_both = [&](const KernelHandle& first, const KernelHandle& second) {
        auto dx = upload(data);
        auto one = first.launch_with(linear(n), dx.address(), n);
        ASSERT_TRUE(one.ok()) << one.error().describe();
        auto two = second.launch_with(linear(n), dx.address(), n);
        ASSERT_TRUE(two.ok()) << two.error().describe();
        auto got = dx.download_floats();
        ASSERT_TRUE(got.ok());
        std::vector<float> want(n);
        for (std::uint32_t i = 0; i < n; ++i) want[i] = (data[i] + 1.0f) * 2.0f;
        expect_close(*got, want, 0);
    };
    auto other = driver::OwnedContext::create(0);
    ASSERT_TRUE(other.ok()) << other.error().describe();
    ASSERT_TRUE(other->make_current().ok());
    auto times_two = add_one->module().kernel("times_two");  // first resolved away from home
    ASSERT_TRUE(times_two.ok()) << times_two.error().describe();
    run_both(*add_one, *times_two);
    ASSERT_TRUE(context_->make_current().ok());
    run_both(*add_one, *times_two);
    EXPECT_EQ(cache.stats().compiles, 1u);
}

// A disk hit loaded in one context keeps none of its bytes (one device); a second context gets
// them back from the disk. If they left the disk meanwhile, the launch there says so, and the next
// lookup builds the kernel again.
TEST_F(GpuTest, ASecondContextReadsADiskHitBackAndRebuildsWhenItIsGone) {
    if (driver::device_count().value() != 1) {
        GTEST_SKIP() << "bytes are let go only in a process that sees one device";
    }
    test::TempDir temp;
    CacheOptions options;
    options.disk_directory = temp.path() + "/cache";
    {
        ASSERT_TRUE(KernelCache(options)
                        .kernel("residual_add:512", residual_add_source, "residual_add")
                        .ok());
    }
    const std::uint32_t n = 512;
    auto a = random_floats(n, 51), b = random_floats(n, 52);
    const auto expected = examples::residual_add_ref(a, b);
    auto run = [&](const KernelHandle& kernel) -> Result<void> {
        auto da = upload(a), db = upload(b), dout = poisoned(n);
        auto launched =
            kernel.launch_with(linear(n), dout.address(), da.address(), db.address(), n);
        if (!launched) return launched;
        expect_close(*dout.download_floats(), expected, 0);
        return ok();
    };
    for (const bool remove_first : {false, true}) {
        SCOPED_TRACE(remove_first ? "entry removed before the second context" : "entry on disk");
        ASSERT_TRUE(context_->make_current().ok());
        KernelCache cache(options);
        auto kernel = cache.kernel("residual_add:512", residual_add_source, "residual_add");
        ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
        EXPECT_EQ(cache.stats().disk_hits, 1u);
        ASSERT_TRUE(run(*kernel).ok());
        if (remove_first) test::remove_entries(options.disk_directory);
        auto second = driver::OwnedContext::create(0);
        ASSERT_TRUE(second.ok()) << second.error().describe();
        ASSERT_TRUE(second->make_current().ok());
        auto launched = run(*kernel);
        if (!remove_first) {
            ASSERT_TRUE(launched.ok()) << launched.error().describe();
            EXPECT_EQ(cache.stats().read_backs, 1u) << "the bytes were kept, not read back";
            continue;
        }
        ASSERT_FALSE(launched.ok());
        EXPECT_EQ(launched.error().code(), Errc::kArtifactGone) << launched.error().describe();
        auto rebuilt = cache.kernel("residual_add:512", residual_add_source, "residual_add");
        ASSERT_TRUE(rebuilt.ok()) << rebuilt.error().describe();
        auto again = run(*rebuilt);
        ASSERT_TRUE(again.ok()) << again.error().describe();
        EXPECT_EQ(cache.stats().compiles, 1u);
        kernel = KernelHandle();
        rebuilt = KernelHandle();
    }
    ASSERT_TRUE(context_->make_current().ok());
}

// warm_up, cold (compiled on its workers) and then in a new cache on the warm disk tier (each
// entry read once, loaded as it comes): every kernel it hands back computes the right thing.
TEST_F(GpuTest, WarmUpColdAndFromTheDiskTierGivesKernelsThatMatchTheCpuReference) {
    test::TempDir temp;
    CacheOptions options;
    options.disk_directory = temp.path() + "/cache";
    const std::vector<int> widths = {32, 100, 257, 1000, 1024, 1500};
    const std::vector<WarmUpItem> items = softmax_items(widths);
    const bool host_compiles = driver::nvjitlink_api().ok();
    for (const bool warm : {false, true}) {
        SCOPED_TRACE(warm ? "a new cache on the warm disk tier" : "cold");
        KernelCache cache(options);
        auto results = cache.warm_up(items, 4);
        ASSERT_EQ(results.size(), items.size());
        for (std::size_t i = 0; i < items.size(); ++i) {
            ASSERT_TRUE(results[i].ok()) << results[i].error().describe();
            ASSERT_EQ(results[i]->module().key(), items[i].key);
            const int cols = widths[i], rows = 33;
            auto in = random_floats(static_cast<std::size_t>(rows * cols), 90u + i);
            auto din = upload(in), dout = poisoned(in.size());
            const auto r = static_cast<std::uint32_t>(rows);
            ASSERT_TRUE(results[i]->launch_with(linear(r), dout.address(), din.address(), r).ok());
            ASSERT_TRUE(context_->synchronize().ok());
            expect_close(*dout.download_floats(), examples::softmax_rows_ref(in, rows, cols), 1e-4);
        }
        const CacheStats stats = cache.stats();
        if (!host_compiles) continue;  // the driver's JIT: nothing is stored
        EXPECT_EQ(stats.compiles, warm ? 0u : items.size());
        EXPECT_EQ(stats.disk_hits, warm ? items.size() : 0u);
    }
}

// A warm-up's bundles (its modules linked a few to a cubin after it): a later warm-up loads each
// as one module for its keys, and every kernel it hands back computes the right thing.
// Generators reuse kernel names: here every module but the first names its kernel softmax_rows,
// each for other columns, and each key must run its own.
TEST_F(GpuTest, KernelsLoadedFromAWarmUpsBundleMatchTheCpuReference) {
    if (!driver::nvjitlink_api().ok()) GTEST_SKIP() << "no nvJitLink: nothing is stored";
    test::TempDir temp;
    const CacheOptions options = with_bundles(temp);
    const std::vector<int> widths = {32, 100, 257, 1000, 1024, 64, 128, 513, 777, 2048, 3, 96};
    std::vector<WarmUpItem> items;
    for (int cols : widths) {
        const std::string name = items.empty() ? "softmax_rows_first" : "softmax_rows";
        items.push_back({"softmax:" + std::to_string(cols),
                         [cols, name]() -> Result<Source> {
                             return Source::ptx(examples::softmax_rows_ptx(cols, name));
                         },
                         name});
    }
    {
        KernelCache cache(options);
        for (auto& result : cache.warm_up(items, 4)) ASSERT_TRUE(result.ok());
        cache.wait_for_uploads();
    }
    ASSERT_GE(bundle_entries(options.disk_directory), 1u);
    KernelCache cache(options);
    auto results = cache.warm_up(items, 4);
    expect_softmax_rows(results, widths, 290u);
    EXPECT_EQ(cache.stats().compiles, 0u);
    EXPECT_EQ(cache.stats().disk_hits, items.size());
    // A key finds only its own kernel in the code it shares.
    auto other = cache.kernel(items[0].key, items[0].make_source, items[1].kernel_name);
    ASSERT_FALSE(other.ok());
    EXPECT_EQ(other.error().code(), Errc::kKernelNotFound);
}

// A cold warm-up of many kernels links their bundles first and loads one module a bundle; every
// kernel it hands back computes the right thing, and so does each key's own entry, made after it.
TEST_F(GpuTest, KernelsOfBundlesLinkedFirstMatchTheCpuReference) {
    if (!driver::nvjitlink_api().ok()) GTEST_SKIP() << "no nvJitLink: nothing is stored";
    test::TempDir temp;
    const CacheOptions options = with_bundles(temp);
    // At most 32 members a bundle: 320 kernels make at least 10, enough to link first on 1
    // thread.
    std::vector<int> widths;
    for (int cols = 1; cols <= 320; ++cols) widths.push_back(cols * 7);
    const std::vector<WarmUpItem> items = softmax_items(widths);
    {
        KernelCache cache(options);
        auto results = cache.warm_up(items, 1);
        // Linked before it returned.
        ASSERT_GE(bundle_entries(options.disk_directory),
                  cache::WarmUpBundles::kLinkFirstBundlesPerThread);
        expect_softmax_rows(results, widths, 33u);
        EXPECT_EQ(cache.stats().compiles, items.size());
        cache.wait_for_uploads();
    }
    KernelCache cache(options);
    std::vector<Result<KernelHandle>> one_by_one;
    for (const WarmUpItem& item : items) {
        one_by_one.push_back(cache.kernel(item.key, item.make_source, item.kernel_name));
    }
    expect_softmax_rows(one_by_one, widths, 33u);
    EXPECT_EQ(cache.stats().compiles, 0u);
    EXPECT_EQ(cache.stats().disk_hits, items.size());
}

// A GPU node with an empty disk runs kernels another node compiled into Redis, and they compute
// what the CPU reference does.
TEST_F(GpuTest, KernelsFromTheRemoteTierMatchTheCpuReference) {
    if (!driver::nvjitlink_api().ok()) GTEST_SKIP() << "no nvJitLink: nothing is stored";
    if (!fakes::RedisServer::available()) GTEST_SKIP() << fakes::RedisServer::unavailable_reason();
    auto server = fakes::RedisServer::start();
    ASSERT_TRUE(server.ok()) << server.error().describe();
    test::TempDir temp;
    const std::vector<int> widths = {32, 257, 1024};
    auto items = [&] { return softmax_items(widths); };
    {
        CacheOptions builder;
        builder.disk_directory = temp.path() + "/builder";
        builder.remote = (*server)->url();
        KernelCache cache(builder);
        for (auto& result : cache.warm_up(items(), 4)) ASSERT_TRUE(result.ok());
        cache.wait_for_uploads();
        // Each key's entry, the bundles (on by default) the warm-up linked and its record of
        // them: everything the builder's disk holds, and what the node's warm-up then loads.
        ASSERT_GE(bundle_entries(builder.disk_directory), 1u);
        ASSERT_EQ(cache.stats().remote_writes,
                  widths.size() + bundle_entries(builder.disk_directory) + kWarmUpRecords);
        ASSERT_EQ(cache.stats().remote_writes, test::entry_files(builder.disk_directory).size());
    }
    CacheOptions node;
    node.disk_directory = temp.path() + "/node";
    node.remote = (*server)->url();
    KernelCache cache(node);
    expect_softmax_rows(cache.warm_up(items(), 4), widths, 190u);
    EXPECT_EQ(cache.stats().compiles, 0u);
    EXPECT_EQ(cache.stats().remote_hits, widths.size());
}

TEST_F(GpuTest, ClearWhileHandleIsLiveKeepsItLaunchable) {
    KernelCache cache;
    const std::uint32_t n = 1000;
    auto a = random_floats(n, 21), b = random_floats(n, 22);
    auto da = upload(a), db = upload(b), dout = poisoned(n);
    auto kernel = cache.kernel("residual_add:1000", residual_add_source, "residual_add");
    ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
    cache.clear();
    EXPECT_EQ(cache.size(), 0u);
    EXPECT_EQ(cache.stats().loaded_libraries, 1u);
    ASSERT_TRUE(kernel->launch_with(linear(n), dout.address(), da.address(), db.address(), n).ok());
    ASSERT_TRUE(context_->synchronize().ok());
    expect_close(*dout.download_floats(), examples::residual_add_ref(a, b), 0);
    kernel = KernelHandle();  // last user lets go: the library is unloaded
    util::EpochDomain::global().synchronize();
    EXPECT_EQ(cache.stats().loaded_libraries, 0u);
}

TEST_F(GpuTest, BadPtxReturnsTheJitLog) {
    KernelCache cache;
    const std::string bad =
        ".version 7.8\n.target sm_70\n.address_size 64\n"
        ".visible .entry broken()\n{\n  add.f32 %f1, %f2, %nope;\n  ret;\n}\n";
    auto kernel = cache.kernel(
        "broken", [&] { return Source::ptx(bad); }, "broken");
    ASSERT_FALSE(kernel.ok());
    EXPECT_EQ(kernel.error().code(), Errc::kCompileFailed);
    EXPECT_FALSE(kernel.error().log().empty()) << kernel.error().describe();
    std::printf("JIT error as returned: %s\n", kernel.error().describe().c_str());
    EXPECT_EQ(cache.size(), 0u);  // failures are never cached
    EXPECT_EQ(cache.stats().compile_failures, 1u);
}

TEST_F(GpuTest, WrongArgumentCountIsAnErrorNotACrash) {
    KernelCache cache;
    auto kernel = cache.kernel("residual_add", residual_add_source, "residual_add");
    ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
    std::uint64_t out = 0, a = 0;
    void* args[] = {&out, &a};
    auto launched = kernel->launch(linear(32), args);
    ASSERT_FALSE(launched.ok());
    EXPECT_EQ(launched.error().code(), Errc::kArgumentMismatch);
    EXPECT_NE(launched.error().message().find("takes 4 parameters, launch passed 2"),
              std::string::npos)
        << launched.error().message();
}

TEST_F(GpuTest, WrongArgumentSizeIsAnError) {
    KernelCache cache;
    auto kernel = cache.kernel(
        "scale", [] { return Source::ptx(examples::scale_ptx()); }, "scale_kernel");
    ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
    std::uint64_t data = 0;
    double factor = 2.0;  // the kernel takes a 4-byte float
    std::uint32_t n = 0;
    auto launched = kernel->launch_with(linear(32), data, factor, n);
    ASSERT_FALSE(launched.ok());
    EXPECT_EQ(launched.error().code(), Errc::kArgumentMismatch);
}

TEST_F(GpuTest, SixteenThreadsMissingOneKeyCompileOnce) {
    KernelCache cache;
    constexpr int kThreads = 16;
    std::latch start(kThreads);
    std::atomic<int> generated{0}, ok_count{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < kThreads; ++t) {
        pool.emplace_back([&] {
            ASSERT_TRUE(context_->make_current().ok());
            start.arrive_and_wait();
            auto kernel = cache.kernel(
                "softmax:777",
                [&] {
                    generated++;
                    return Source::ptx(examples::softmax_rows_ptx(777));
                },
                "softmax_rows");
            if (kernel.ok()) ok_count++;
        });
    }
    for (auto& thread : pool) thread.join();
    EXPECT_EQ(ok_count.load(), kThreads);
    EXPECT_EQ(generated.load(), 1);
    EXPECT_EQ(cache.stats().compiles, 1u);
}

// Eight threads, each in a context of its own, launch one handle at once, from a disk hit whose
// bytes were let go: the library for the other contexts is made once, and every launch is right.
TEST_F(GpuTest, EightContextsLaunchingOneHandleAtOnceAllGetRightResults) {
    test::TempDir temp;
    CacheOptions options;
    options.disk_directory = temp.path() + "/cache";
    {
        ASSERT_TRUE(KernelCache(options)
                        .kernel("residual_add:777", residual_add_source, "residual_add")
                        .ok());
    }
    KernelCache cache(options);
    auto kernel = cache.kernel("residual_add:777", residual_add_source, "residual_add");
    ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
    const std::uint32_t n = 777;
    auto a = random_floats(n, 61), b = random_floats(n, 62);
    const auto expected = examples::residual_add_ref(a, b);
    constexpr int kThreads = 8;
    std::latch start(kThreads);
    std::atomic<int> right{0};
    std::vector<std::string> failures(kThreads);
    std::vector<std::thread> pool;
    for (int t = 0; t < kThreads; ++t) {
        pool.emplace_back([&, t] {
            auto own = driver::OwnedContext::create(0);  // current on this thread
            if (!own) {
                failures[t] = own.error().describe();
                start.arrive_and_wait();
                return;
            }
            auto da = upload(a), db = upload(b), dout = poisoned(n);
            start.arrive_and_wait();
            auto launched =
                kernel->launch_with(linear(n), dout.address(), da.address(), db.address(), n);
            if (!launched) {
                failures[t] = launched.error().describe();
                return;
            }
            auto got = dout.download_floats();
            if (got && *got == expected) {
                right++;
            } else {
                failures[t] = "wrong results";
            }
        });
    }
    for (auto& thread : pool) thread.join();
    for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], "") << "thread " << t;
    EXPECT_EQ(right.load(), kThreads);
    const bool one_device = driver::device_count().value() == 1;
    EXPECT_EQ(cache.stats().disk_hits, 1u);
    EXPECT_EQ(cache.stats().read_backs, one_device ? 1u : 0u)
        << "one read-back for all other contexts (bytes are kept with more than one device)";
    ASSERT_TRUE(context_->make_current().ok());
}

// CUDA C++ compiled by NVRTC on the host for the device's exact arch, loaded as a cubin.
TEST_F(GpuTest, NvrtcCubinOfATemplateKernelLoadsAndMatchesCpuReference) {
    if (!driver::nvrtc_api().ok()) GTEST_SKIP() << driver::nvrtc_api().error().describe();
    compile::CudaProgram program;
    program.name = "scale.cu";
    program.code =
        "template <typename T> __global__ void scale(T* data, T factor, unsigned n) {\n"
        "    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    if (i < n) data[i] *= factor;\n"
        "}\n";
    program.name_expressions = {"scale<float>"};
    auto compiled = compile::compile_cuda(program, compile::Target{context_->info().arch, false});
    ASSERT_TRUE(compiled.ok()) << compiled.error().describe();

    KernelCache cache;
    const std::string lowered = compiled->lowered_names.at("scale<float>");
    auto kernel = cache.kernel(
        "scale<float>", [&] { return Source::cubin(compiled->cubin); }, lowered);
    ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
    EXPECT_EQ(kernel->param_count(), 3);

    const std::uint32_t n = 5000;
    auto data = random_floats(n, 31);
    auto ddata = upload(data);
    const float factor = 1.5f;
    ASSERT_TRUE(kernel->launch_with(linear(n), ddata.address(), factor, n).ok());
    ASSERT_TRUE(context_->synchronize().ok());
    expect_close(*ddata.download_floats(), examples::scale_ref(data, factor), 0);
}

// CUDA C++ through the cache itself: NVRTC on a miss, the template found by its name expression,
// then a new cache (a new process's view) loading it from the disk tier with no compile; both
// launch and match the CPU reference.
TEST_F(GpuTest, CudaSourceThroughTheTiersMatchesCpuReferenceWarmAndCold) {
    if (!driver::nvrtc_identity().ok()) GTEST_SKIP() << driver::nvrtc_identity().error().describe();
    test::TempDir temp;
    CacheOptions options;
    options.disk_directory = temp.path() + "/cache";
    auto source = [] {
        Source src = Source::cuda(
            "#include \"scale_impl.h\"\n"
            "template <typename T> __global__ void scale(T* data, T factor, unsigned n) {\n"
            "    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i < n) data[i] = times(data[i], factor);\n"
            "}\n",
            {"-std=c++17"}, {"scale<float>"});
        src.headers = {{"scale_impl.h",
                        "template <typename T> __device__ T times(T a, T b) { return a * b; }"}};
        return src;
    };
    for (int run = 0; run < 2; ++run) {
        KernelCache cache(options);
        auto kernel = cache.kernel("scale:cuda", source, "scale<float>");
        ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
        EXPECT_EQ(cache.stats().compiles, run == 0 ? 1u : 0u);
        EXPECT_EQ(cache.stats().disk_hits, run == 0 ? 0u : 1u);
        const std::uint32_t n = 3001;
        auto data = random_floats(n, 51 + run);
        auto ddata = upload(data);
        ASSERT_TRUE(kernel->launch_with(linear(n), ddata.address(), 2.5f, n).ok());
        ASSERT_TRUE(context_->synchronize().ok());
        expect_close(*ddata.download_floats(), examples::scale_ref(data, 2.5f), 0);
    }
}

// CUB's block reduce through the cache, with each CUDA C++ recipe: the lean one (NVRTC's PTX
// without the header constants nothing uses, through nvJitLink) and NVRTC's own cubin (an option
// that may reach ptxas keeps it). Both must sum like the CPU, cold and warm.
TEST_F(GpuTest, CubBlockReduceMatchesCpuReferenceWithEitherRecipe) {
    if (!driver::nvrtc_identity().ok()) GTEST_SKIP() << driver::nvrtc_identity().error().describe();
    const std::string root = "/usr/local/cuda/include";
    if (!std::filesystem::exists(root + "/cccl/cub")) GTEST_SKIP() << "no CUB under " << root;
    const std::uint32_t blocks = 97;
    const auto in = random_floats(std::size_t{blocks} * 128, 77);
    std::vector<double> want(blocks, 0.0);
    for (std::size_t i = 0; i < in.size(); ++i) want[i / 128] += in[i];
    for (const char* extra : {"-DLEAN=1", "--maxrregcount=128"}) {
        test::TempDir temp;
        CacheOptions options;
        options.disk_directory = temp.path() + "/cache";
        auto source = [&] {
            return Source::cuda(
                "#include <cub/block/block_reduce.cuh>\n"
                "extern \"C\" __global__ void block_sum(float* out, const float* in) {\n"
                "    using Reduce = cub::BlockReduce<float, 128>;\n"
                "    __shared__ typename Reduce::TempStorage storage;\n"
                "    float v = Reduce(storage).Sum(in[blockIdx.x * 128 + threadIdx.x]);\n"
                "    if (threadIdx.x == 0) out[blockIdx.x] = v;\n}\n",
                {"-std=c++17", "-I" + root + "/cccl", "-I" + root, extra});
        };
        for (int run = 0; run < 2; ++run) {
            KernelCache cache(options);
            auto kernel = cache.kernel("block_sum", source, "block_sum");
            ASSERT_TRUE(kernel.ok()) << extra << ": " << kernel.error().describe();
            EXPECT_EQ(cache.stats().compiles, run == 0 ? 1u : 0u) << extra;
            auto din = upload(in);
            auto dout = poisoned(blocks);
            LaunchConfig config;
            config.block.x = 128;
            config.grid.x = blocks;
            ASSERT_TRUE(kernel->launch_with(config, dout.address(), din.address()).ok()) << extra;
            ASSERT_TRUE(context_->synchronize().ok());
            const auto got = *dout.download_floats();
            // 128 floats of magnitude ~3 summed in another order: 1e-3 is ~50x float's error.
            for (std::uint32_t b = 0; b < blocks; ++b) {
                ASSERT_NEAR(got[b], want[b], 1e-3) << extra << ", block " << b;
            }
        }
    }
}

// PTX linked to a cubin by nvJitLink on the host, then loaded: no driver JIT involved.
// ---- What real generators' kernels need beyond a plain launch (issue 18) ----

// CUDA C++ for the current device's arch, compiled by NVRTC through the cache.
Result<KernelHandle> cuda_kernel(KernelCache& cache, const std::string& key, std::string code,
                                 const std::string& name,
                                 std::vector<std::string> options = {"-std=c++17"}) {
    return cache.kernel(
        key, [code, options] { return Source::cuda(code, options); }, name);
}

std::vector<std::uint32_t> download_words(const driver::DeviceBuffer& buffer) {
    auto floats = buffer.download_floats();
    std::vector<std::uint32_t> words(floats ? floats->size() : 0);
    if (floats) std::memcpy(words.data(), floats->data(), words.size() * 4);
    return words;
}

Result<void> write_global(const DeviceGlobal& global, const std::vector<float>& data) {
    const auto& api = driver::cuda_api();
    if (!api) return api.error();
    if (data.size() * sizeof(float) > global.size) {
        return Error(Errc::kInvalidArgument, "more data than the global holds");
    }
    CUresult rc = (*api)->cuMemcpyHtoD(static_cast<CUdeviceptr>(global.address), data.data(),
                                       data.size() * sizeof(float));
    if (rc != CUDA_SUCCESS) return (*api)->error(Errc::kDriverError, "cuMemcpyHtoD", rc);
    return ok();
}

TEST_F(GpuTest, AKernelWith200KiBOfDynamicSharedMemoryLaunchesOnceAllowedInEveryContext) {
    if (!driver::nvrtc_identity().ok()) GTEST_SKIP() << driver::nvrtc_identity().error().describe();
    KernelCache cache;
    auto kernel = cuda_kernel(cache, "smem_reverse",
                              "extern \"C\" __global__ void smem_reverse(float* out, const float* "
                              "in, unsigned n) {\n"
                              "    extern __shared__ float s[];\n"
                              "    for (unsigned i = threadIdx.x; i < n; i += blockDim.x) s[i] = "
                              "in[i];\n"
                              "    __syncthreads();\n"
                              "    for (unsigned i = threadIdx.x; i < n; i += blockDim.x) out[i] = "
                              "s[n - 1 - i];\n"
                              "}\n",
                              "smem_reverse");
    ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
    const std::uint32_t bytes = 200 * 1024, n = bytes / 4;
    const auto data = random_floats(n, 5);
    std::vector<float> reversed(data.rbegin(), data.rend());
    auto in = upload(data);
    auto out = poisoned(n);
    LaunchConfig config{{1, 1, 1}, {256, 1, 1}, bytes, nullptr};
    EXPECT_FALSE(kernel->launch_with(config, out.address(), in.address(), n).ok())
        << "above 48 KiB, the driver refuses the launch until the kernel is allowed it";
    ASSERT_TRUE(kernel->set_attribute(KernelAttribute::kMaxDynamicSharedBytes, bytes).ok());
    auto launched = kernel->launch_with(config, out.address(), in.address(), n);
    ASSERT_TRUE(launched.ok()) << launched.error().describe();
    ASSERT_TRUE(context_->synchronize().ok());
    expect_close(*out.download_floats(), reversed, 0);
    // The native handle says what the driver now holds for the kernel here.
    auto function = kernel->native_function();
    ASSERT_TRUE(function.ok()) << function.error().describe();
    int allowed = 0;
    ASSERT_EQ((*driver::cuda_api())
                  ->cuFuncGetAttribute(&allowed, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                       static_cast<CUfunction>(*function)),
              CUDA_SUCCESS);
    EXPECT_EQ(allowed, static_cast<int>(bytes));
    // Another context: the same handle launches as big without being told again.
    auto other = driver::OwnedContext::create(0);
    ASSERT_TRUE(other.ok()) << other.error().describe();
    auto in2 = upload(data);
    auto out2 = poisoned(n);
    launched = kernel->launch_with(config, out2.address(), in2.address(), n);
    ASSERT_TRUE(launched.ok()) << launched.error().describe();
    ASSERT_EQ((*driver::cuda_api())->cuCtxSynchronize(), CUDA_SUCCESS);
    expect_close(*out2.download_floats(), reversed, 0);
    ASSERT_TRUE(context_->make_current().ok());
}

TEST_F(GpuTest, AClusterLaunchGivesEachBlockItsRankInItsCluster) {
    if (!driver::nvrtc_identity().ok()) GTEST_SKIP() << driver::nvrtc_identity().error().describe();
    if (context_->info().arch < 90) GTEST_SKIP() << "clusters need sm_90";
    KernelCache cache;
    auto kernel =
        cuda_kernel(cache, "cluster_rank",
                    "extern \"C\" __global__ void cluster_rank(unsigned* out) {\n"
                    "    unsigned rank, size;\n"
                    "    asm volatile(\"mov.u32 %0, %%cluster_ctarank;\" : \"=r\"(rank));\n"
                    "    asm volatile(\"mov.u32 %0, %%cluster_nctarank;\" : \"=r\"(size));\n"
                    "    if (threadIdx.x == 0) out[blockIdx.x] = rank | (size << 16);\n"
                    "}\n",
                    "cluster_rank");
    ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
    const std::uint32_t blocks = 8;
    auto out = poisoned(blocks);
    LaunchConfig config{{blocks, 1, 1}, {32, 1, 1}, 0, nullptr};
    ASSERT_TRUE(kernel->launch_with(config, out.address()).ok());
    ASSERT_TRUE(context_->synchronize().ok());
    auto words = download_words(out);
    for (std::uint32_t b = 0; b < blocks; ++b) EXPECT_EQ(words[b], 0u | (1u << 16)) << b;
    config.cluster = {2, 1, 1};
    auto launched = kernel->launch_with(config, out.address());
    ASSERT_TRUE(launched.ok()) << launched.error().describe();
    ASSERT_TRUE(context_->synchronize().ok());
    words = download_words(out);
    for (std::uint32_t b = 0; b < blocks; ++b) {
        EXPECT_EQ(words[b], (b % 2) | (2u << 16)) << "block " << b << " in clusters of 2";
    }
}

TEST_F(GpuTest, ACooperativeLaunchLetsTheWholeGridSynchronise) {
    if (!driver::nvrtc_identity().ok()) GTEST_SKIP() << driver::nvrtc_identity().error().describe();
    KernelCache cache;
    // Each thread doubles its element, the grid meets at a barrier, then each reads the element
    // another block doubled: right only if every block finished the first phase first. A barrier
    // over the whole grid is sound only where every block is resident at once, which a
    // cooperative launch guarantees (and refuses when the grid cannot fit).
    auto kernel = cuda_kernel(cache, "grid_mirror",
                              "extern \"C\" __global__ void grid_mirror(float* data, float* out, "
                              "unsigned n, unsigned* arrived) {\n"
                              "    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                              "    if (i < n) data[i] = data[i] * 2.0f;\n"
                              "    __threadfence();\n"
                              "    __syncthreads();\n"
                              "    if (threadIdx.x == 0) {\n"
                              "        atomicAdd(arrived, 1u);\n"
                              "        while (atomicAdd(arrived, 0u) < gridDim.x) {}\n"
                              "    }\n"
                              "    __syncthreads();\n"
                              "    if (i < n) out[i] = __ldcg(&data[n - 1 - i]);\n"
                              "}\n",
                              "grid_mirror");
    ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
    const std::uint32_t blocks = 64, threads = 128, n = blocks * threads;
    const auto data = random_floats(n, 9);
    std::vector<float> want(n);
    for (std::uint32_t i = 0; i < n; ++i) want[i] = data[n - 1 - i] * 2.0f;
    auto arrived = upload({0.0f});  // all bits zero
    auto in = upload(data);
    auto out = poisoned(n);
    LaunchConfig config{{blocks, 1, 1}, {threads, 1, 1}, 0, nullptr};
    config.cooperative = true;
    auto launched = kernel->launch_with(config, in.address(), out.address(), n, arrived.address());
    ASSERT_TRUE(launched.ok()) << launched.error().describe();
    ASSERT_TRUE(context_->synchronize().ok());
    expect_close(*out.download_floats(), want, 0);
    // The driver took it as cooperative: a grid that cannot be resident at once is refused.
    config.grid.x = 1u << 20;
    auto refused = kernel->launch_with(config, in.address(), out.address(), n, arrived.address());
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.error().message().find("COOPERATIVE_LAUNCH_TOO_LARGE"), std::string::npos)
        << refused.error().message();
}

TEST_F(GpuTest, AConstantTableWrittenThroughTheModuleGlobalIsWhatTheKernelReadsPerContext) {
    if (!driver::nvrtc_identity().ok()) GTEST_SKIP() << driver::nvrtc_identity().error().describe();
    KernelCache cache;
    auto kernel = cuda_kernel(cache, "scale_by_table",
                              "__constant__ float table[256];\n"
                              "extern \"C\" __global__ void scale_by_table(float* out, const "
                              "float* in, unsigned n) {\n"
                              "    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                              "    if (i < n) out[i] = in[i] * table[i % 256];\n"
                              "}\n",
                              "scale_by_table");
    ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
    const std::uint32_t n = 4096;
    const auto data = random_floats(n, 11);
    const auto check = [&](const std::vector<float>& table) {
        auto global = kernel->module().global("table");
        ASSERT_TRUE(global.ok()) << global.error().describe();
        EXPECT_EQ(global->size, 256u * sizeof(float));
        ASSERT_TRUE(write_global(*global, table).ok());
        auto in = upload(data);
        auto out = poisoned(n);
        ASSERT_TRUE(kernel->launch_with(linear(n), out.address(), in.address(), n).ok());
        ASSERT_EQ((*driver::cuda_api())->cuCtxSynchronize(), CUDA_SUCCESS);
        std::vector<float> want(n);
        for (std::uint32_t i = 0; i < n; ++i) want[i] = data[i] * table[i % 256];
        expect_close(*out.download_floats(), want, 1e-6);
    };
    check(random_floats(256, 12));
    // Another context has its own copy of the table, written and read there.
    auto other = driver::OwnedContext::create(0);
    ASSERT_TRUE(other.ok()) << other.error().describe();
    check(random_floats(256, 13));
    ASSERT_TRUE(context_->make_current().ok());
    EXPECT_FALSE(kernel->module().global("no_such_table").ok());
}

TEST_F(GpuTest, AProgrammaticDependentLaunchWaitsWhereItSaysAndGetsTheRightResult) {
    if (!driver::nvrtc_identity().ok()) GTEST_SKIP() << driver::nvrtc_identity().error().describe();
    if (context_->info().arch < 90) GTEST_SKIP() << "programmatic dependent launch needs sm_90";
    KernelCache cache;
    const std::string code =
        "extern \"C\" __global__ void produce(float* data, unsigned n) {\n"
        "    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    if (i < n) data[i] = data[i] + 1.0f;\n"
        "    asm volatile(\"griddepcontrol.launch_dependents;\" ::: \"memory\");\n"
        "}\n"
        "extern \"C\" __global__ void consume(float* out, const float* data, unsigned n) {\n"
        "    asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");\n"
        "    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    if (i < n) out[i] = data[i] * 3.0f;\n"
        "}\n";
    auto module = cache.module("pdl", [code] { return Source::cuda(code, {"-std=c++17"}); });
    ASSERT_TRUE(module.ok()) << module.error().describe();
    auto produce = module->kernel("produce");
    auto consume = module->kernel("consume");
    ASSERT_TRUE(produce.ok() && consume.ok());
    const std::uint32_t n = 1 << 16;
    const auto data = random_floats(n, 17);
    std::vector<float> want(n);
    for (std::uint32_t i = 0; i < n; ++i) want[i] = (data[i] + 1.0f) * 3.0f;
    auto buffer = upload(data);
    auto out = poisoned(n);
    ASSERT_TRUE(produce->launch_with(linear(n), buffer.address(), n).ok());
    LaunchConfig dependent = linear(n);
    dependent.programmatic_dependent_launch = true;
    auto launched = consume->launch_with(dependent, out.address(), buffer.address(), n);
    ASSERT_TRUE(launched.ok()) << launched.error().describe();
    ASSERT_TRUE(context_->synchronize().ok());
    expect_close(*out.download_floats(), want, 1e-6);
}

// Two PTX modules that name their kernel and their variable alike, as generators do for other
// shapes: each is linked with names of its own (build/unique_names.hpp), and each is asked for,
// launched and written by the names its PTX gives, without meeting the other's.
std::string adds_a_global_ptx(const char* increment) {
    return std::string(
               ".version 7.8\n.target sm_70\n.address_size 64\n\n"
               ".visible .global .align 4 .f32 offset;\n\n"
               ".visible .entry add_offset(.param .u64 out, .param .u32 n)\n{\n"
               "    .reg .pred %p<2>;\n    .reg .b32 %r<3>;\n    .reg .f32 %f<3>;\n"
               "    .reg .b64 %rd<4>;\n"
               "    ld.param.u64 %rd1, [out];\n    ld.param.u32 %r1, [n];\n"
               "    mov.u32 %r2, %tid.x;\n    setp.ge.u32 %p1, %r2, %r1;\n"
               "    @%p1 bra DONE;\n    ld.global.f32 %f1, [offset];\n"
               "    add.f32 %f2, %f1, ") +
           increment +
           ";\n    cvta.to.global.u64 %rd2, %rd1;\n    mul.wide.u32 %rd3, %r2, 4;\n"
           "    add.s64 %rd2, %rd2, %rd3;\n    st.global.f32 [%rd2], %f2;\nDONE:\n    ret;\n}\n";
}

TEST_F(GpuTest, TwoPtxModulesThatNameTheirKernelAndVariableAlikeEachRunTheirOwn) {
    if (!driver::nvjitlink_api().ok()) GTEST_SKIP() << driver::nvjitlink_api().error().describe();
    KernelCache cache;
    const std::string one = adds_a_global_ptx("0f3F800000");  // + 1
    const std::string two = adds_a_global_ptx("0f40000000");  // + 2
    auto first = cache.kernel(
        "add_offset:one", [&] { return Source::ptx(one); }, "add_offset");
    auto second = cache.kernel(
        "add_offset:two", [&] { return Source::ptx(two); }, "add_offset");
    ASSERT_TRUE(first.ok()) << first.error().describe();
    ASSERT_TRUE(second.ok()) << second.error().describe();
    const auto run = [&](KernelHandle& kernel, float offset, float want) {
        auto global = kernel.module().global("offset");
        ASSERT_TRUE(global.ok()) << global.error().describe();
        ASSERT_TRUE(write_global(*global, {offset}).ok());
        const std::uint32_t n = 32;
        auto out = poisoned(n);
        ASSERT_TRUE(kernel.launch_with(linear(n), out.address(), n).ok());
        ASSERT_TRUE(context_->synchronize().ok());
        expect_close(*out.download_floats(), std::vector<float>(n, want), 0);
    };
    run(*first, 10.0f, 11.0f);
    run(*second, 20.0f, 22.0f);
    run(*first, 30.0f, 31.0f);  // its own variable, not the other's
}

TEST_F(GpuTest, NvJitLinkCubinOfPtxLoadsAndMatchesCpuReference) {
    if (!driver::nvjitlink_api().ok()) GTEST_SKIP() << driver::nvjitlink_api().error().describe();
    auto linked = compile::link_ptx(examples::gelu_ptx(), compile::Target{context_->info().arch});
    ASSERT_TRUE(linked.ok()) << linked.error().describe();
    KernelCache cache;
    auto kernel = cache.kernel(
        "gelu:cubin", [&] { return Source::cubin(linked->cubin); }, "gelu");
    ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
    const std::uint32_t n = 4099;
    auto in = random_floats(n, 41);
    auto din = upload(in), dout = poisoned(n);
    ASSERT_TRUE(kernel->launch_with(linear(n), dout.address(), din.address(), n).ok());
    ASSERT_TRUE(context_->synchronize().ok());
    expect_close(*dout.download_floats(), examples::gelu_ref(in), 1e-4);
}

}  // namespace
}  // namespace kcache
