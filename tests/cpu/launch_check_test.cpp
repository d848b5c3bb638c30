// SPDX-License-Identifier: Apache-2.0
// KernelHandle's launch checks: argument count (and, for typed launches, sizes) against the
// kernel's parameters, before anything reaches the driver.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cctype>
#include <cstdint>
#include <latch>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "kcache/kcache.hpp"
#include "test_support.hpp"
#include "testing/fake_driver.hpp"

namespace kcache {
namespace {

using fakes::FakeDriver;

// True if `text` contains `number` as a whole number (not as part of a longer run of digits, so
// that the "32" of a key "...:f32" does not count as a 3).
bool contains_number(const std::string& text, int number) {
    const std::string digits = std::to_string(number);
    for (std::size_t pos = text.find(digits); pos != std::string::npos;
         pos = text.find(digits, pos + 1)) {
        const bool starts = pos == 0 || !std::isdigit(static_cast<unsigned char>(text[pos - 1]));
        const std::size_t end = pos + digits.size();
        const bool ends =
            end == text.size() || !std::isdigit(static_cast<unsigned char>(text[end]));
        if (starts && ends) return true;
    }
    return false;
}

class LaunchCheckTest : public ::testing::Test {
protected:
    Result<KernelHandle> residual_add() {
        return cache.kernel(
            "residual_add:f32", [] { return test::residual_add_source(); }, "residual_add");
    }
    // The same kernel as a (fake) binary: its parameters are not read from a PTX source, so the
    // cache asks the driver for them.
    Result<KernelHandle> residual_add_binary() {
        return cache.kernel(
            "residual_add:binary",
            [] {
                return Source::cubin(std::string("\x7f"
                                                 "ELF") +
                                     examples::residual_add_ptx());
            },
            "residual_add");
    }
    Result<KernelHandle> scale() {
        return cache.kernel(
            "scale:f32", [] { return test::scale_source(); }, "scale_kernel");
    }

    std::shared_ptr<FakeDriver> fake = std::make_shared<FakeDriver>();
    KernelCache cache{test::fake_options(fake)};
};

TEST_F(LaunchCheckTest, ParamCountComesFromTheDriver) {
    auto handle = residual_add_binary();
    ASSERT_TRUE(handle.ok());
    EXPECT_EQ(handle->param_count(), 4);
}

TEST_F(LaunchCheckTest, ParametersAreAskedAtTheFirstCheckNotAtLoad) {
    auto handle = residual_add_binary();
    ASSERT_TRUE(handle.ok());
    EXPECT_EQ(fake->param_queries(), 0) << "a warm start should not pay for the query";
    std::uint64_t out = 0, a = 0, b = 0;
    std::uint32_t n = 0;
    ASSERT_TRUE(handle->launch_with(LaunchConfig{}, out, a, b, n).ok());
    ASSERT_TRUE(handle->launch_with(LaunchConfig{}, out, a, b, n).ok());
    EXPECT_EQ(handle->param_count(), 4);
    EXPECT_EQ(fake->param_queries(), 1) << "asked once, then known";
}

// A PTX source declares its kernels' parameters: the checks need no driver query at all.
TEST_F(LaunchCheckTest, PtxParametersComeFromTheSourceWithoutAQuery) {
    auto handle = residual_add();
    ASSERT_TRUE(handle.ok());
    std::uint64_t out = 0, a = 0, b = 0;
    std::uint32_t n = 0;
    ASSERT_TRUE(handle->launch_with(LaunchConfig{}, out, a, b, n).ok());
    EXPECT_FALSE(handle->launch_with(LaunchConfig{}, out, a, b).ok()) << "n is missing";
    const double wrong = 0;
    EXPECT_FALSE(handle->launch_with(LaunchConfig{}, out, a, b, wrong).ok()) << "n is a .u32";
    EXPECT_EQ(handle->param_count(), 4);
    EXPECT_EQ(fake->param_queries(), 0);
}

TEST_F(LaunchCheckTest, VerificationAsksTheDriverForPtxParametersToo) {
    CacheOptions options = test::fake_options(fake);
    options.verify = true;
    KernelCache verifying(options);
    auto handle = verifying.kernel(
        "residual_add:f32", [] { return test::residual_add_source(); }, "residual_add");
    ASSERT_TRUE(handle.ok());
    EXPECT_EQ(handle->param_count(), 4);
    EXPECT_EQ(fake->param_queries(), 1);
}

// warm_up works the sizes out on its workers; they must reach the loaded kernel all the same.
TEST_F(LaunchCheckTest, WarmedUpPtxKernelsTakeTheirParametersFromTheSourceToo) {
    auto results = cache.warm_up(
        {{"residual_add:f32", [] { return test::residual_add_source(); }, "residual_add"}}, 2);
    ASSERT_TRUE(results.at(0).ok()) << results[0].error().describe();
    const KernelHandle& handle = *results[0];
    std::uint64_t out = 0, a = 0, b = 0;
    std::uint32_t n = 0;
    ASSERT_TRUE(handle.launch_with(LaunchConfig{}, out, a, b, n).ok());
    const double wrong = 0;
    EXPECT_FALSE(handle.launch_with(LaunchConfig{}, out, a, b, wrong).ok()) << "n is a .u32";
    EXPECT_EQ(handle.param_count(), 4);
    EXPECT_EQ(fake->param_queries(), 0);
}

TEST_F(LaunchCheckTest, WarmUpWithVerificationAsksTheDriverForPtxParameters) {
    CacheOptions options = test::fake_options(fake);
    options.verify = true;
    KernelCache verifying(options);
    auto results = verifying.warm_up(
        {{"residual_add:f32", [] { return test::residual_add_source(); }, "residual_add"}}, 2);
    ASSERT_TRUE(results.at(0).ok()) << results[0].error().describe();
    EXPECT_EQ(results[0]->param_count(), 4);
    EXPECT_EQ(fake->param_queries(), 1);
}

TEST_F(LaunchCheckTest, ThreadsCheckingFirstTogetherAskOnce) {
    auto handle = residual_add_binary();
    ASSERT_TRUE(handle.ok());
    fake->set_params_delay(std::chrono::milliseconds(20));  // a slow query: the others arrive
    std::vector<std::thread> threads;
    std::atomic<int> mismatches{0};
    std::latch start(8);
    for (int t = 0; t < 8; ++t) {
        threads.emplace_back([&] {
            start.arrive_and_wait();
            std::uint64_t out = 0;
            if (handle->launch_with(LaunchConfig{}, out).error().code() ==
                Errc::kArgumentMismatch) {
                mismatches.fetch_add(1);
            }
        });
    }
    for (auto& thread : threads) thread.join();
    EXPECT_EQ(mismatches.load(), 8);
    EXPECT_EQ(fake->param_queries(), 1);
}

TEST_F(LaunchCheckTest, WrongArgumentCountIsMismatchNamingKernelAndCounts) {
    auto handle = residual_add();
    ASSERT_TRUE(handle.ok());
    std::uint64_t out = 0, a = 0, b = 0;
    std::array<void*, 3> three = {&out, &a, &b};  // n is missing

    auto launched = handle->launch(test::one_block(), three);

    ASSERT_FALSE(launched.ok());
    EXPECT_EQ(launched.error().code(), Errc::kArgumentMismatch);
    const std::string& message = launched.error().message();
    EXPECT_NE(message.find("residual_add"), std::string::npos) << message;
    EXPECT_TRUE(contains_number(message, 4)) << "the kernel's count is missing: " << message;
    EXPECT_TRUE(contains_number(message, 3)) << "the launch's count is missing: " << message;
}

TEST_F(LaunchCheckTest, MismatchedLaunchReachesNoDriver) {
    auto handle = residual_add();
    ASSERT_TRUE(handle.ok());
    std::uint64_t out = 0;
    std::array<void*, 1> one = {&out};

    ASSERT_FALSE(handle->launch(test::one_block(), one).ok());

    EXPECT_EQ(fake->launches(), 0);
}

TEST_F(LaunchCheckTest, CorrectArgumentCountLaunches) {
    auto handle = residual_add();
    ASSERT_TRUE(handle.ok());

    auto launched = test::launch_residual_add(*handle);

    ASSERT_TRUE(launched.ok()) << launched.error().describe();
    EXPECT_EQ(fake->launches_of("residual_add"), 1);
}

TEST_F(LaunchCheckTest, TypedArgumentOfWrongSizeIsMismatchNamingTheParameter) {
    auto handle = scale();
    ASSERT_TRUE(handle.ok());
    std::uint64_t data = 0;
    double factor = 2.0;  // the kernel's factor is a .f32
    std::uint32_t n = 16;

    auto launched = handle->launch_with(test::one_block(), data, factor, n);

    ASSERT_FALSE(launched.ok());
    EXPECT_EQ(launched.error().code(), Errc::kArgumentMismatch);
    const std::string& message = launched.error().message();
    EXPECT_NE(message.find("scale_kernel"), std::string::npos) << message;
    EXPECT_NE(message.find("parameter 1"), std::string::npos) << message;
    EXPECT_TRUE(contains_number(message, 8)) << "the size passed is missing: " << message;
    EXPECT_TRUE(contains_number(message, 4)) << "the parameter's size is missing: " << message;
    EXPECT_EQ(fake->launches(), 0);
}

TEST_F(LaunchCheckTest, TypedArgumentsOfRightSizesLaunch) {
    auto handle = scale();
    ASSERT_TRUE(handle.ok());
    std::uint64_t data = 0;
    float factor = 2.0f;
    std::uint32_t n = 16;

    auto launched = handle->launch_with(test::one_block(), data, factor, n);

    ASSERT_TRUE(launched.ok()) << launched.error().describe();
    EXPECT_EQ(fake->launches_of("scale_kernel"), 1);
}

TEST_F(LaunchCheckTest, TypedLaunchWithWrongCountIsMismatch) {
    auto handle = scale();
    ASSERT_TRUE(handle.ok());
    std::uint64_t data = 0;
    float factor = 2.0f;

    auto launched = handle->launch_with(test::one_block(), data, factor);

    ASSERT_FALSE(launched.ok());
    EXPECT_EQ(launched.error().code(), Errc::kArgumentMismatch);
    EXPECT_EQ(fake->launches(), 0);
}

TEST_F(LaunchCheckTest, UnknownParamsGiveParamCountMinusOne) {
    fake->set_params_supported(false);
    auto handle = residual_add_binary();
    ASSERT_TRUE(handle.ok()) << handle.error().describe();
    EXPECT_EQ(handle->param_count(), -1);
}

TEST_F(LaunchCheckTest, UnknownParamsPassAnyCountThrough) {
    fake->set_params_supported(false);
    auto handle = residual_add_binary();
    ASSERT_TRUE(handle.ok());
    std::uint64_t out = 0;
    std::array<void*, 1> one = {&out};
    double wrong_size = 0;

    auto by_span = handle->launch(test::one_block(), one);
    auto typed = handle->launch_with(test::one_block(), wrong_size);

    EXPECT_TRUE(by_span.ok()) << by_span.error().describe();
    EXPECT_TRUE(typed.ok()) << typed.error().describe();
    EXPECT_EQ(fake->launches(), 2);
}

TEST_F(LaunchCheckTest, EmptyKernelHandleLaunchIsInvalidArgument) {
    KernelHandle empty;
    ASSERT_FALSE(static_cast<bool>(empty));
    std::array<void*, 0> none{};

    auto launched = empty.launch(test::one_block(), none);

    ASSERT_FALSE(launched.ok());
    EXPECT_EQ(launched.error().code(), Errc::kInvalidArgument);
    EXPECT_EQ(fake->launches(), 0);
}

TEST_F(LaunchCheckTest, EmptyKernelHandleTypedLaunchIsInvalidArgument) {
    KernelHandle empty;
    std::uint32_t n = 0;
    auto launched = empty.launch_with(test::one_block(), n);
    ASSERT_FALSE(launched.ok());
    EXPECT_EQ(launched.error().code(), Errc::kInvalidArgument);
}

TEST_F(LaunchCheckTest, EmptyKernelHandleHasNoNameAndUnknownParams) {
    KernelHandle empty;
    EXPECT_TRUE(empty.name().empty());
    EXPECT_EQ(empty.param_count(), -1);
    EXPECT_FALSE(static_cast<bool>(empty.module()));
}

// A moved-from handle no longer keeps its library loaded, so it must not claim a kernel either
// (an implicit move once left kernel_ set).
TEST_F(LaunchCheckTest, MovedFromKernelHandleIsEmpty) {
    auto result = residual_add();
    ASSERT_TRUE(result.ok());
    KernelHandle source = std::move(result).value();

    KernelHandle target = std::move(source);

    EXPECT_TRUE(static_cast<bool>(target));
    EXPECT_FALSE(static_cast<bool>(source)) << "a moved-from KernelHandle still claims a kernel";
    EXPECT_FALSE(static_cast<bool>(source.module()));
}

// Same cause as MovedFromKernelHandleIsEmpty: launching a moved-from handle is an error.
TEST_F(LaunchCheckTest, LaunchOfMovedFromKernelHandleIsInvalidArgument) {
    auto result = residual_add();
    ASSERT_TRUE(result.ok());
    KernelHandle source = std::move(result).value();
    KernelHandle target;
    target = std::move(source);

    auto launched = test::launch_residual_add(source);

    ASSERT_FALSE(launched.ok()) << "a moved-from KernelHandle launched without holding its library";
    EXPECT_EQ(launched.error().code(), Errc::kInvalidArgument);
    EXPECT_EQ(fake->launches(), 0);
}

TEST_F(LaunchCheckTest, EmptyModuleHandleKernelIsInvalidArgument) {
    ModuleHandle empty;
    auto kernel = empty.kernel("residual_add");
    ASSERT_FALSE(kernel.ok());
    EXPECT_EQ(kernel.error().code(), Errc::kInvalidArgument);
}

}  // namespace
}  // namespace kcache
