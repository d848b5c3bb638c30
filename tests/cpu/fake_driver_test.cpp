// SPDX-License-Identifier: Apache-2.0
// fakes::FakeDriver: the in-memory driver the cache tests stand on. If it misreads PTX or
// miscounts, every other CPU test is measuring the wrong thing.
#include "testing/fake_driver.hpp"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "ptx_kernels.hpp"
#include "test_support.hpp"

namespace kcache::driver {
namespace {

using fakes::FakeDriver;

std::vector<std::size_t> sizes_of(const std::vector<KernelParam>& params) {
    std::vector<std::size_t> sizes;
    for (const auto& param : params) sizes.push_back(param.size);
    return sizes;
}

std::vector<std::size_t> offsets_of(const std::vector<KernelParam>& params) {
    std::vector<std::size_t> offsets;
    for (const auto& param : params) offsets.push_back(param.offset);
    return offsets;
}

TEST(FakeDriver, ParsesResidualAddEntryAndParamSizes) {
    FakeDriver fake;
    auto library = fake.load_module(test::residual_add_source());
    ASSERT_TRUE(library.ok()) << library.error().describe();
    auto kernel = fake.get_kernel(*library, "residual_add");
    ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
    auto params = fake.kernel_params(*kernel);
    ASSERT_TRUE(params.ok()) << params.error().describe();

    EXPECT_EQ(sizes_of(*params), (std::vector<std::size_t>{8, 8, 8, 4}));
    EXPECT_EQ(offsets_of(*params), (std::vector<std::size_t>{0, 8, 16, 24}));
}

TEST(FakeDriver, ParsesScaleKernelParamSizes) {
    FakeDriver fake;
    auto library = fake.load_module(test::scale_source());
    ASSERT_TRUE(library.ok()) << library.error().describe();
    auto kernel = fake.get_kernel(*library, "scale_kernel");
    ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
    auto params = fake.kernel_params(*kernel);
    ASSERT_TRUE(params.ok());

    EXPECT_EQ(sizes_of(*params), (std::vector<std::size_t>{8, 4, 4}));
}

TEST(FakeDriver, ParsesKernelWithNoParams) {
    FakeDriver fake;
    auto library = fake.load_module(Source::ptx(examples::empty_kernel_ptx()));
    ASSERT_TRUE(library.ok());
    auto kernel = fake.get_kernel(*library, "empty_kernel");
    ASSERT_TRUE(kernel.ok());
    auto params = fake.kernel_params(*kernel);
    ASSERT_TRUE(params.ok());
    EXPECT_TRUE(params->empty());
}

TEST(FakeDriver, UnknownKernelNameIsKernelNotFound) {
    FakeDriver fake;
    auto library = fake.load_module(test::residual_add_source());
    ASSERT_TRUE(library.ok());
    auto kernel = fake.get_kernel(*library, "gelu");
    ASSERT_FALSE(kernel.ok());
    EXPECT_EQ(kernel.error().code(), Errc::kKernelNotFound);
}

TEST(FakeDriver, SourceWithFakeJitErrorFailsWithLog) {
    FakeDriver fake;
    auto library = fake.load_module(test::broken_source());
    ASSERT_FALSE(library.ok());
    EXPECT_EQ(library.error().code(), Errc::kCompileFailed);
    EXPECT_NE(library.error().log().find("FAKE_JIT_ERROR"), std::string::npos)
        << library.error().log();
    EXPECT_EQ(fake.load_attempts(), 1);
    EXPECT_EQ(fake.loads(), 0);
}

TEST(FakeDriver, SourceWithoutEntryFailsToLoad) {
    FakeDriver fake;
    auto library = fake.load_module(Source::ptx(".version 7.8\n.target sm_70\n"));
    ASSERT_FALSE(library.ok());
    EXPECT_EQ(library.error().code(), Errc::kCompileFailed);
    EXPECT_FALSE(library.error().log().empty());
}

TEST(FakeDriver, CubinWithoutElfHeaderFailsToLoad) {
    FakeDriver fake;
    auto library = fake.load_module(Source::cubin(examples::residual_add_ptx()));
    ASSERT_FALSE(library.ok());
    EXPECT_EQ(library.error().code(), Errc::kCompileFailed);
}

TEST(FakeDriver, FailNextLoadsFailsExactlyThatManyLoads) {
    FakeDriver fake;
    fake.fail_next_loads(2);

    auto first = fake.load_module(test::residual_add_source());
    auto second = fake.load_module(test::residual_add_source());
    auto third = fake.load_module(test::residual_add_source());

    ASSERT_FALSE(first.ok());
    EXPECT_EQ(first.error().code(), Errc::kCompileFailed);
    EXPECT_FALSE(first.error().log().empty());
    EXPECT_FALSE(second.ok());
    EXPECT_TRUE(third.ok());
    EXPECT_EQ(fake.load_attempts(), 3);
    EXPECT_EQ(fake.loads(), 1);
}

TEST(FakeDriver, DefaultArchZeroMeansNoContext) {
    FakeDriver fake(0);
    auto arch = fake.current_arch();
    ASSERT_FALSE(arch.ok());
    EXPECT_EQ(arch.error().code(), Errc::kNoContext);
}

TEST(FakeDriver, ThreadsWithoutScopedContextSeeDefaultArch) {
    FakeDriver fake(86);
    auto arch = fake.current_arch();
    ASSERT_TRUE(arch.ok());
    EXPECT_EQ(*arch, 86);
}

TEST(FakeDriver, ScopedContextChangesArchOnThisThreadOnly) {
    FakeDriver fake(90);
    FakeDriver::ScopedContext context(80);

    int other_thread_arch = -1;
    std::thread other([&] {
        auto arch = fake.current_arch();
        other_thread_arch = arch.ok() ? *arch : -1;
    });
    other.join();

    auto mine = fake.current_arch();
    ASSERT_TRUE(mine.ok());
    EXPECT_EQ(*mine, 80);
    EXPECT_EQ(other_thread_arch, 90);
}

TEST(FakeDriver, ScopedContextRestoresPreviousArchOnExit) {
    FakeDriver fake(90);
    {
        FakeDriver::ScopedContext outer(80);
        {
            FakeDriver::ScopedContext inner(75);
            EXPECT_EQ(*fake.current_arch(), 75);
        }
        EXPECT_EQ(*fake.current_arch(), 80);
    }
    EXPECT_EQ(*fake.current_arch(), 90);
}

TEST(FakeDriver, ScopedContextZeroMeansNoContext) {
    FakeDriver fake(90);
    FakeDriver::ScopedContext none(0);
    auto arch = fake.current_arch();
    ASSERT_FALSE(arch.ok());
    EXPECT_EQ(arch.error().code(), Errc::kNoContext);
}

TEST(FakeDriver, CountsLoadsUnloadsAndLiveLibraries) {
    FakeDriver fake;
    auto a = fake.load_module(test::residual_add_source());
    auto b = fake.load_module(test::scale_source());
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(fake.live_libraries(), 2);

    fake.unload_module(*a);

    EXPECT_EQ(fake.loads(), 2);
    EXPECT_EQ(fake.unloads(), 1);
    EXPECT_EQ(fake.live_libraries(), 1);
}

TEST(FakeDriver, LaunchIsCountedPerKernelName) {
    FakeDriver fake;
    auto library = fake.load_module(test::residual_add_source());
    ASSERT_TRUE(library.ok());
    auto kernel = fake.get_kernel(*library, "residual_add");
    ASSERT_TRUE(kernel.ok());
    test::ResidualAddArgs args;
    auto pointers = args.pointers();

    ASSERT_TRUE(fake.launch(*kernel, test::one_block(), pointers.data()).ok());
    ASSERT_TRUE(fake.launch(*kernel, test::one_block(), pointers.data()).ok());

    EXPECT_EQ(fake.launches(), 2);
    EXPECT_EQ(fake.launches_of("residual_add"), 2);
    EXPECT_EQ(fake.launches_of("scale_kernel"), 0);
}

TEST(FakeDriver, LaunchAfterUnloadIsCountedAsUseAfterUnload) {
    FakeDriver fake;
    auto library = fake.load_module(test::residual_add_source());
    ASSERT_TRUE(library.ok());
    auto kernel = fake.get_kernel(*library, "residual_add");
    ASSERT_TRUE(kernel.ok());
    fake.unload_module(*library);

    test::ResidualAddArgs args;
    auto pointers = args.pointers();
    auto launched = fake.launch(*kernel, test::one_block(), pointers.data());

    EXPECT_FALSE(launched.ok());
    EXPECT_EQ(fake.use_after_unload(), 1);
    EXPECT_EQ(fake.launches(), 0);
}

TEST(FakeDriver, DoubleUnloadIsCountedAsUseAfterUnload) {
    FakeDriver fake;
    auto library = fake.load_module(test::residual_add_source());
    ASSERT_TRUE(library.ok());
    fake.unload_module(*library);
    fake.unload_module(*library);
    EXPECT_EQ(fake.unloads(), 1);
    EXPECT_EQ(fake.use_after_unload(), 1);
}

TEST(FakeDriver, ParamsUnsupportedIsReportedAsUnsupported) {
    FakeDriver fake;
    fake.set_params_supported(false);
    auto library = fake.load_module(test::residual_add_source());
    ASSERT_TRUE(library.ok());
    auto kernel = fake.get_kernel(*library, "residual_add");
    ASSERT_TRUE(kernel.ok());
    auto params = fake.kernel_params(*kernel);
    ASSERT_FALSE(params.ok());
    EXPECT_EQ(params.error().code(), Errc::kUnsupported);
}

}  // namespace
}  // namespace kcache::driver
