// SPDX-License-Identifier: Apache-2.0
// What a real generator's kernels need beyond a plain launch, through handles over the fake
// driver: native handles, a module's globals, kernel attributes (dynamic shared memory above
// 48 KiB) and the extended launch options reaching the driver as given. The real driver's side
// is tests/gpu (on the H200).
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>

#include "kcache/kcache.hpp"
#include "test_support.hpp"
#include "testing/fake_driver.hpp"

namespace kcache {
namespace {

using fakes::FakeDriver;

// A kernel with a table of constants and a __device__ counter beside it.
constexpr const char* kTablePtx = R"(.version 8.0
.target sm_90
.address_size 64

.const .align 4 .f32 table[256];
.visible .global .align 8 .u64 counter;

.visible .entry scale_by_table(.param .u64 out, .param .u64 in, .param .u32 n)
{
  ret;
}
)";

class LaunchFeaturesTest : public ::testing::Test {
protected:
    Result<KernelHandle> table_kernel() {
        return cache.kernel(
            "table:f32", [] { return Source::ptx(kTablePtx); }, "scale_by_table");
    }

    std::shared_ptr<FakeDriver> fake = std::make_shared<FakeDriver>();
    KernelCache cache{test::fake_options(fake)};
};

TEST_F(LaunchFeaturesTest, AModulesGlobalsHaveTheirDeclaredSizes) {
    auto kernel = table_kernel();
    ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
    auto table = kernel->module().global("table");
    ASSERT_TRUE(table.ok()) << table.error().describe();
    EXPECT_EQ(table->size, 256u * 4u);
    EXPECT_NE(table->address, 0u);
    auto counter = kernel->module().global("counter");
    ASSERT_TRUE(counter.ok()) << counter.error().describe();
    EXPECT_EQ(counter->size, 8u);
    EXPECT_NE(counter->address, table->address);
}

TEST_F(LaunchFeaturesTest, AGlobalTheModuleLacksIsAnErrorNamingItAndTheKey) {
    auto kernel = table_kernel();
    ASSERT_TRUE(kernel.ok());
    auto missing = kernel->module().global("no_such_table");
    ASSERT_FALSE(missing.ok());
    EXPECT_EQ(missing.error().code(), Errc::kInvalidArgument);
    EXPECT_NE(missing.error().message().find("no_such_table"), std::string::npos);
    EXPECT_NE(missing.error().message().find("table:f32"), std::string::npos);
    EXPECT_FALSE(ModuleHandle().global("table").ok()) << "an empty handle";
}

TEST_F(LaunchFeaturesTest, NativeHandlesNameTheDriversKernel) {
    auto kernel = table_kernel();
    ASSERT_TRUE(kernel.ok());
    auto function = kernel->native_function();
    auto library_kernel = kernel->native_kernel();
    ASSERT_TRUE(function.ok()) << function.error().describe();
    ASSERT_TRUE(library_kernel.ok()) << library_kernel.error().describe();
    EXPECT_NE(*function, nullptr);
    EXPECT_EQ(*library_kernel, *function) << "the fake's kernel is both";
    EXPECT_FALSE(KernelHandle().native_function().ok());
    EXPECT_FALSE(KernelHandle().native_kernel().ok());
}

TEST_F(LaunchFeaturesTest, MoreThan48KiBOfSharedMemoryNeedsTheAttributeFirst) {
    auto kernel = table_kernel();
    ASSERT_TRUE(kernel.ok());
    LaunchConfig big{{1, 1, 1}, {128, 1, 1}, 200 * 1024, nullptr};
    const std::uint64_t out = 0, in = 0;
    const std::uint32_t n = 0;
    EXPECT_FALSE(kernel->launch_with(big, out, in, n).ok()) << "as the real driver refuses it";
    ASSERT_TRUE(kernel->set_attribute(KernelAttribute::kMaxDynamicSharedBytes, 200 * 1024).ok());
    const auto id = driver::KernelId(*kernel->native_kernel());
    EXPECT_EQ(fake->attribute_of(id, KernelAttribute::kMaxDynamicSharedBytes), 200 * 1024);
    EXPECT_TRUE(kernel->launch_with(big, out, in, n).ok());
    // Every handle to the kernel shares it: a new lookup launches as big at once.
    auto again = table_kernel();
    ASSERT_TRUE(again.ok());
    EXPECT_TRUE(again->launch_with(big, out, in, n).ok());
}

TEST_F(LaunchFeaturesTest, AnAttributeTheDeviceRefusesIsAnErrorAndIsNotKept) {
    auto kernel = table_kernel();
    ASSERT_TRUE(kernel.ok());
    ASSERT_TRUE(kernel->set_attribute(KernelAttribute::kMaxDynamicSharedBytes, 64 * 1024).ok());
    auto refused = kernel->set_attribute(KernelAttribute::kMaxDynamicSharedBytes, 1 << 30);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().code(), Errc::kInvalidArgument);
    const auto id = driver::KernelId(*kernel->native_kernel());
    EXPECT_EQ(fake->attribute_of(id, KernelAttribute::kMaxDynamicSharedBytes), 64 * 1024);
}

TEST_F(LaunchFeaturesTest, ACachePreferenceIsSetOnTheKernel) {
    auto kernel = table_kernel();
    ASSERT_TRUE(kernel.ok());
    ASSERT_TRUE(kernel->set_cache_config(CacheConfig::kPreferShared).ok());
    const auto id = driver::KernelId(*kernel->native_kernel());
    EXPECT_EQ(fake->cache_config_of(id), CacheConfig::kPreferShared);
}

TEST_F(LaunchFeaturesTest, ClusterCooperativeAndDependentLaunchReachTheDriverAsGiven) {
    auto kernel = table_kernel();
    ASSERT_TRUE(kernel.ok());
    LaunchConfig config{{8, 1, 1}, {128, 1, 1}, 0, nullptr};
    config.cluster = {2, 1, 1};
    config.cooperative = true;
    config.programmatic_dependent_launch = true;
    const std::uint64_t out = 0, in = 0;
    const std::uint32_t n = 0;
    ASSERT_TRUE(kernel->launch_with(config, out, in, n).ok());
    const LaunchConfig seen = fake->last_launch();
    EXPECT_EQ(seen.cluster.x, 2u);
    EXPECT_EQ(seen.cluster.y, 1u);
    EXPECT_TRUE(seen.cooperative);
    EXPECT_TRUE(seen.programmatic_dependent_launch);
    // The argument checks stay: a wrong count fails before the driver sees the launch.
    EXPECT_EQ(kernel->launch_with(config, out, in).error().code(), Errc::kArgumentMismatch);
}

TEST_F(LaunchFeaturesTest, APlainLaunchAsksForNoneOfTheExtendedOptions) {
    auto kernel = table_kernel();
    ASSERT_TRUE(kernel.ok());
    const std::uint64_t out = 0, in = 0;
    const std::uint32_t n = 0;
    ASSERT_TRUE(
        kernel->launch_with(LaunchConfig{{1, 1, 1}, {32, 1, 1}, 0, nullptr}, out, in, n).ok());
    const LaunchConfig seen = fake->last_launch();
    EXPECT_EQ(seen.cluster.x + seen.cluster.y + seen.cluster.z, 0u);
    EXPECT_FALSE(seen.cooperative);
    EXPECT_FALSE(seen.programmatic_dependent_launch);
}

}  // namespace
}  // namespace kcache
