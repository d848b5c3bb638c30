// SPDX-License-Identifier: Apache-2.0
// The default driver on a machine with no usable GPU (the CPU test machine): every call says why,
// as an error value, and nothing crashes.
#include <gtest/gtest.h>

#include <string>

#include "driver/driver.hpp"
#include "kcache/kcache.hpp"
#include "test_support.hpp"

namespace kcache {
namespace {

// On a machine without libcuda.so.1 (or whose cuInit fails) it is kNoDriver; on one with a
// driver but no current context it is kNoContext. Either way it is an error, never a crash.
void expect_no_gpu_error(const Error& error) {
    EXPECT_TRUE(error.code() == Errc::kNoDriver || error.code() == Errc::kNoContext)
        << error.describe();
    EXPECT_FALSE(error.message().empty());
    if (error.code() == Errc::kNoDriver) {
        EXPECT_EQ(error.message().rfind("no CUDA driver", 0), 0u)
            << "a kNoDriver message should start with \"no CUDA driver\": " << error.message();
    }
}

TEST(NoDriver, CurrentArchReportsWhyThereIsNoGpu) {
    auto driver = driver::default_driver();
    ASSERT_NE(driver, nullptr);

    auto arch = driver->current_arch();

    ASSERT_FALSE(arch.ok()) << "this test expects a machine with no current CUDA context";
    expect_no_gpu_error(arch.error());
}

TEST(NoDriver, DescribeIsNotEmpty) {
    EXPECT_FALSE(driver::default_driver()->describe().empty());
}

TEST(NoDriver, DefaultDriverIsLoadedOnce) {
    EXPECT_EQ(driver::default_driver().get(), driver::default_driver().get());
}

TEST(NoDriver, CacheWithDefaultDriverReturnsTheDriversError) {
    KernelCache cache;  // no driver given: the process's CUDA driver
    int calls = 0;

    auto handle =
        cache.kernel("residual_add:f32", test::counting_residual_add(calls), "residual_add");

    ASSERT_FALSE(handle.ok());
    expect_no_gpu_error(handle.error());
    EXPECT_EQ(handle.error().code(), driver::default_driver()->current_arch().error().code());
    EXPECT_EQ(calls, 0) << "the generator ran although nothing could be compiled";
    EXPECT_EQ(cache.size(), 0u);
}

TEST(NoDriver, GlobalCacheReturnsTheDriversError) {
    KernelCache& cache = KernelCache::global();
    ASSERT_EQ(&cache, &KernelCache::global());

    auto handle = cache.kernel(
        "residual_add:f32", [] { return test::residual_add_source(); }, "residual_add");

    ASSERT_FALSE(handle.ok());
    expect_no_gpu_error(handle.error());
}

TEST(NoDriver, SeedCallsWithDefaultDriverReturnErrors) {
    KernelCache cache;
    test::ResidualAddArgs args;
    auto pointers = args.pointers();

    auto module = cache.get_or_compile("residual_add:f32", examples::residual_add_ptx());
    auto launched = cache.compile_lock_launch("residual_add:f32", examples::residual_add_ptx(),
                                              "residual_add", test::one_block(), pointers);

    ASSERT_FALSE(module.ok());
    expect_no_gpu_error(module.error());
    ASSERT_FALSE(launched.ok());
    expect_no_gpu_error(launched.error());
}

}  // namespace
}  // namespace kcache
