// SPDX-License-Identifier: Apache-2.0
// The C API (include/kcache/kcache.h) over the fake driver: what the C suite (tests/c) cannot
// reach without a GPU. Lookups and hits, launches and their checks, handles that outlive a clear
// and their cache, modules, warm-up, the seed's calls and the per-thread counters. The cache is
// made from C++ options (capi::wrap) so that it can take the fake.
#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "capi/capi_internal.hpp"
#include "kcache/kcache.h"
#include "test_support.hpp"
#include "testing/fake_driver.hpp"

namespace kcache {
namespace {

// What a C caller's generator would keep in its user data.
struct Generator {
    std::string ptx;
    int calls = 0;
    bool fail = false;
};

extern "C" kcache_status make_from(void* user_data, kcache_source_builder* source) {
    auto* generator = static_cast<Generator*>(user_data);
    ++generator->calls;
    if (generator->fail) {
        kcache_source_set_error(source, "told to fail");
        return KCACHE_SOURCE_FAILED;
    }
    return kcache_source_set_ptx(source, generator->ptx.data(), generator->ptx.size());
}

constexpr std::uint32_t kOne[3] = {1, 1, 1};
constexpr std::uint32_t kBlock[3] = {128, 1, 1};

class CApiOverFakeDriver : public ::testing::Test {
protected:
    void SetUp() override {
        kcache_reset_thread_stats();
        cache_ = capi::wrap(test::fake_options(fake_));
        ASSERT_NE(cache_, nullptr);
    }
    void TearDown() override { kcache_cache_destroy(cache_); }

    kcache_kernel* residual_add(Generator& generator, const char* key = "residual_add:f32") {
        kcache_kernel* kernel = nullptr;
        const kcache_status status =
            kcache_cache_get_kernel(cache_, key, make_from, &generator, "residual_add", &kernel);
        EXPECT_EQ(status, KCACHE_OK) << kcache_last_error_message();
        return kernel;
    }

    kcache_stats stats() const {
        kcache_stats s{};
        s.struct_size = sizeof s;
        EXPECT_EQ(kcache_cache_stats(cache_, &s), KCACHE_OK);
        return s;
    }

    std::shared_ptr<fakes::FakeDriver> fake_ = std::make_shared<fakes::FakeDriver>();
    kcache_cache* cache_ = nullptr;
    Generator residual_add_ptx_{examples::residual_add_ptx()};
    test::ResidualAddArgs args_;
    std::array<void*, 4> pointers_ = args_.pointers();
};

TEST_F(CApiOverFakeDriver, ASecondLookupIsAHitThatRunsNoGenerator) {
    kcache_kernel* first = residual_add(residual_add_ptx_);
    kcache_kernel* second = residual_add(residual_add_ptx_);
    ASSERT_NE(first, nullptr);
    ASSERT_NE(second, nullptr);

    EXPECT_EQ(residual_add_ptx_.calls, 1);
    EXPECT_EQ(fake_->loads(), 1);
    EXPECT_STREQ(kcache_kernel_name(first), "residual_add");
    EXPECT_EQ(kcache_kernel_param_count(first), 4);
    const kcache_stats s = stats();
    EXPECT_EQ(s.hits, 1u);
    EXPECT_EQ(s.misses, 1u);
    EXPECT_EQ(s.entries, 1u);
    EXPECT_EQ(kcache_cache_size(cache_), 1u);
    std::uint64_t hits = 0, misses = 0;
    kcache_thread_stats(&hits, &misses);
    EXPECT_EQ(hits, 1u);
    EXPECT_EQ(misses, 1u);
    kcache_reset_thread_stats();
    kcache_thread_stats(&hits, &misses);
    EXPECT_EQ(hits + misses, 0u);
    kcache_kernel_release(first);
    kcache_kernel_release(second);
}

TEST_F(CApiOverFakeDriver, ALaunchChecksTheArgumentCountFirst) {
    kcache_kernel* kernel = residual_add(residual_add_ptx_);
    ASSERT_NE(kernel, nullptr);

    EXPECT_EQ(kcache_launch(kernel, kOne, kBlock, 0, nullptr, pointers_.data(), 3),
              KCACHE_ARGUMENT_MISMATCH);
    EXPECT_NE(std::string(kcache_last_error_message()).find("takes 4 parameters"),
              std::string::npos)
        << kcache_last_error_message();
    EXPECT_EQ(fake_->launches(), 0);
    EXPECT_EQ(kcache_launch(kernel, kOne, kBlock, 0, nullptr, pointers_.data(), 4), KCACHE_OK)
        << kcache_last_error_message();
    EXPECT_EQ(fake_->launches_of("residual_add"), 1);
    kcache_kernel_release(kernel);
}

TEST_F(CApiOverFakeDriver, ASizedLaunchChecksEachArgumentsSize) {
    kcache_kernel* kernel = residual_add(residual_add_ptx_);
    ASSERT_NE(kernel, nullptr);
    std::array<std::size_t, 4> sizes = {8, 8, 8, 4};

    sizes[3] = 8;  // a 64-bit count where the kernel takes a .u32
    EXPECT_EQ(
        kcache_launch_sized(kernel, kOne, kBlock, 0, nullptr, pointers_.data(), sizes.data(), 4),
        KCACHE_ARGUMENT_MISMATCH);
    EXPECT_NE(std::string(kcache_last_error_message()).find("parameter 3 is 4 bytes"),
              std::string::npos)
        << kcache_last_error_message();
    EXPECT_EQ(fake_->launches(), 0);

    sizes[3] = 4;
    EXPECT_EQ(
        kcache_launch_sized(kernel, kOne, kBlock, 0, nullptr, pointers_.data(), sizes.data(), 4),
        KCACHE_OK)
        << kcache_last_error_message();
    EXPECT_EQ(fake_->launches(), 1);
    kcache_kernel_release(kernel);
}

TEST_F(CApiOverFakeDriver, TheSizedCppLaunchRefusesSpansOfDifferentLengths) {
    kcache_kernel* kernel = residual_add(residual_add_ptx_);
    ASSERT_NE(kernel, nullptr);
    const std::array<std::size_t, 3> sizes = {8, 8, 8};
    auto launched = kernel->handle.launch(test::one_block(), pointers_, sizes);
    ASSERT_FALSE(launched.ok());
    EXPECT_EQ(launched.error().code(), Errc::kInvalidArgument);
    EXPECT_EQ(fake_->launches(), 0);
    kcache_kernel_release(kernel);
}

TEST_F(CApiOverFakeDriver, AKernelOutlivesAClearAndItsCache) {
    kcache_kernel* kernel = residual_add(residual_add_ptx_);
    ASSERT_NE(kernel, nullptr);
    kcache_kernel* clone = nullptr;
    ASSERT_EQ(kcache_kernel_clone(kernel, &clone), KCACHE_OK);

    ASSERT_EQ(kcache_cache_clear(cache_), KCACHE_OK);
    EXPECT_EQ(kcache_cache_size(cache_), 0u);
    EXPECT_EQ(kcache_launch(kernel, kOne, kBlock, 0, nullptr, pointers_.data(), 4), KCACHE_OK);
    kcache_cache_destroy(cache_);
    cache_ = nullptr;
    kcache_kernel_release(kernel);
    EXPECT_EQ(fake_->live_libraries(), 1) << "the clone still holds the code";
    EXPECT_EQ(kcache_launch(clone, kOne, kBlock, 0, nullptr, pointers_.data(), 4), KCACHE_OK);
    kcache_kernel_release(clone);
    EXPECT_EQ(fake_->live_libraries(), 0);
    EXPECT_EQ(fake_->launches(), 2);
    EXPECT_EQ(fake_->use_after_unload(), 0);
}

TEST_F(CApiOverFakeDriver, AModuleGivesItsKernelsByName) {
    kcache_module* module = nullptr;
    ASSERT_EQ(
        kcache_cache_get_module(cache_, "residual_add:f32", make_from, &residual_add_ptx_, &module),
        KCACHE_OK)
        << kcache_last_error_message();
    EXPECT_STREQ(kcache_module_key(module), "residual_add:f32");
    EXPECT_EQ(kcache_module_arch(module), 90);
    EXPECT_STREQ(kcache_module_fingerprint(module), "");  // the driver's JIT: no tier holds it

    kcache_kernel* kernel = nullptr;
    ASSERT_EQ(kcache_module_get_kernel(module, "residual_add", &kernel), KCACHE_OK);
    EXPECT_EQ(kcache_launch(kernel, kOne, kBlock, 0, nullptr, pointers_.data(), 4), KCACHE_OK);
    kcache_kernel* missing = reinterpret_cast<kcache_kernel*>(&module);
    EXPECT_EQ(kcache_module_get_kernel(module, "no_such_kernel", &missing),
              KCACHE_KERNEL_NOT_FOUND);
    EXPECT_EQ(missing, nullptr);
    EXPECT_NE(std::string(kcache_last_error_message()).find("no_such_kernel"), std::string::npos);
    kcache_kernel_release(kernel);
    kcache_module_release(module);
    EXPECT_EQ(residual_add_ptx_.calls, 1);
}

TEST_F(CApiOverFakeDriver, AFailedGeneratorIsNotCachedAndALaterLookupRetries) {
    Generator failing{examples::residual_add_ptx(), 0, true};
    kcache_kernel* kernel = nullptr;
    EXPECT_EQ(kcache_cache_get_kernel(cache_, "residual_add:f32", make_from, &failing,
                                      "residual_add", &kernel),
              KCACHE_SOURCE_FAILED);
    EXPECT_NE(std::string(kcache_last_error_message()).find("told to fail"), std::string::npos);
    EXPECT_EQ(kernel, nullptr);
    EXPECT_EQ(kcache_cache_size(cache_), 0u);

    kernel = residual_add(residual_add_ptx_);
    EXPECT_NE(kernel, nullptr);
    EXPECT_EQ(residual_add_ptx_.calls, 1);
    kcache_kernel_release(kernel);
}

TEST_F(CApiOverFakeDriver, ACompileFailureCarriesTheLogAndIsNotCached) {
    Generator broken{test::broken_source().bytes};
    kcache_kernel* kernel = nullptr;
    EXPECT_EQ(
        kcache_cache_get_kernel(cache_, "broken", make_from, &broken, "residual_add", &kernel),
        KCACHE_COMPILE_FAILED);
    EXPECT_NE(std::string(kcache_last_error_log()).find("FAKE_JIT_ERROR found"), std::string::npos);
    EXPECT_NE(std::string(kcache_last_error_message()).find("FAKE_JIT_ERROR found"),
              std::string::npos);
    EXPECT_EQ(
        kcache_cache_get_kernel(cache_, "broken", make_from, &broken, "residual_add", &kernel),
        KCACHE_COMPILE_FAILED);
    EXPECT_EQ(broken.calls, 2);
}

TEST_F(CApiOverFakeDriver, WarmUpGivesEachItemItsKernelOrItsError) {
    Generator failing{"", 0, true};
    Generator softmax{examples::softmax_rows_ptx(32)};
    std::vector<kcache_warm_up_item> items(3);
    items[0] = {"residual_add:f32", make_from, &residual_add_ptx_,
                "residual_add",     nullptr,   KCACHE_OK};
    items[1] = {"failing", make_from, &failing, "residual_add", nullptr, KCACHE_OK};
    items[2] = {"softmax:32", make_from, &softmax, test::kSoftmax, nullptr, KCACHE_OK};

    EXPECT_EQ(kcache_cache_warm_up(cache_, items.data(), items.size(), sizeof items[0], 2),
              KCACHE_SOURCE_FAILED);
    EXPECT_EQ(items[0].status, KCACHE_OK);
    EXPECT_EQ(items[1].status, KCACHE_SOURCE_FAILED);
    EXPECT_EQ(items[2].status, KCACHE_OK);
    EXPECT_NE(items[0].kernel, nullptr);
    EXPECT_EQ(items[1].kernel, nullptr);
    EXPECT_NE(items[2].kernel, nullptr);
    const std::string message = kcache_last_error_message();
    EXPECT_NE(message.find("1 of 3 items failed"), std::string::npos) << message;
    EXPECT_NE(message.find("item 1: source-failed: key 'failing'"), std::string::npos) << message;
    EXPECT_NE(message.find("told to fail"), std::string::npos) << message;
    EXPECT_EQ(kcache_cache_size(cache_), 2u);
    EXPECT_STREQ(kcache_kernel_name(items[2].kernel), test::kSoftmax);
    for (auto& item : items) kcache_kernel_release(item.kernel);
}

TEST_F(CApiOverFakeDriver, TheSeedsCallsCompileOnceAndLaunch) {
    const std::string ptx = examples::residual_add_ptx();
    kcache_module* module = nullptr;
    ASSERT_EQ(kcache_cache_get_or_compile(cache_, "residual_add:f32", ptx.c_str(), &module),
              KCACHE_OK);
    EXPECT_EQ(
        kcache_cache_compile_lock_launch(cache_, "residual_add:f32", ptx.c_str(), "residual_add",
                                         kOne, kBlock, 0, nullptr, pointers_.data(), 4),
        KCACHE_OK)
        << kcache_last_error_message();
    EXPECT_EQ(
        kcache_cache_compile_lock_launch(cache_, "residual_add:f32", ptx.c_str(), "residual_add",
                                         kOne, kBlock, 0, nullptr, pointers_.data(), 2),
        KCACHE_ARGUMENT_MISMATCH);
    EXPECT_EQ(fake_->loads(), 1);
    EXPECT_EQ(fake_->launches(), 1);
    kcache_module_release(module);
}

TEST_F(CApiOverFakeDriver, AMissWithoutAContextSaysSoAndRunsNoGenerator) {
    fakes::FakeDriver::ScopedContext none(0);
    kcache_kernel* kernel = nullptr;
    EXPECT_EQ(kcache_cache_get_kernel(cache_, "residual_add:f32", make_from, &residual_add_ptx_,
                                      "residual_add", &kernel),
              KCACHE_NO_CONTEXT);
    EXPECT_EQ(kcache_last_error_status(), KCACHE_NO_CONTEXT);
    EXPECT_EQ(residual_add_ptx_.calls, 0);
    EXPECT_EQ(kernel, nullptr);
}

TEST_F(CApiOverFakeDriver, ALaunchPassesItsShapeToTheDriverAndItsErrorBack) {
    kcache_kernel* kernel = residual_add(residual_add_ptx_);
    ASSERT_NE(kernel, nullptr);
    const std::uint32_t no_blocks[3] = {0, 1, 1};
    EXPECT_EQ(kcache_launch(kernel, no_blocks, kBlock, 0, nullptr, pointers_.data(), 4),
              KCACHE_DRIVER_ERROR);
    EXPECT_NE(std::string(kcache_last_error_message()).find("zero grid"), std::string::npos);
    EXPECT_EQ(fake_->launches(), 0);
    kcache_kernel_release(kernel);
}

// Every C entry point runs its body through capi::guarded: no exception crosses into C.
TEST(CApiGuard, AnExceptionBecomesAStatusAndTheLastError) {
    EXPECT_EQ(capi::guarded("kcache_test_call", []() -> kcache_status { throw std::bad_alloc(); }),
              KCACHE_OUT_OF_MEMORY);
    EXPECT_STREQ(kcache_last_error_message(), "out-of-memory: kcache_test_call");
    EXPECT_EQ(capi::guarded("kcache_test_call",
                            []() -> kcache_status { throw std::runtime_error("surprise"); }),
              KCACHE_INTERNAL_ERROR);
    EXPECT_STREQ(kcache_last_error_message(),
                 "internal-error: kcache_test_call: unexpected exception: surprise");
    EXPECT_EQ(capi::guarded("kcache_test_call", []() -> kcache_status { throw 42; }),
              KCACHE_INTERNAL_ERROR);
    EXPECT_EQ(kcache_last_error_status(), KCACHE_INTERNAL_ERROR);
}

// The C codes are Errc's, one for one, and named as kcache's messages name them.
TEST(CApiGuard, EachErrcHasTheStatusOfItsName) {
    for (int code = 0; code <= static_cast<int>(Errc::kArtifactGone); ++code) {
        const auto errc = static_cast<Errc>(code);
        EXPECT_STREQ(kcache_status_name(capi::status_of(errc)), errc_name(errc));
        EXPECT_EQ(capi::fail(Error(errc, "why")), capi::status_of(errc));
        EXPECT_EQ(std::string(kcache_last_error_message()), std::string(errc_name(errc)) + ": why");
    }
}

}  // namespace
}  // namespace kcache

namespace kcache {
namespace {

// The extended launch, attributes, native handles and globals through the C API.
class CApiLaunchFeatures : public ::testing::Test {
protected:
    void SetUp() override {
        cache_ = capi::wrap(test::fake_options(fake_));
        ASSERT_NE(cache_, nullptr);
        generator_.ptx =
            ".version 8.0\n.target sm_90\n.address_size 64\n"
            ".const .align 4 .f32 table[64];\n"
            ".visible .entry k(.param .u64 out, .param .u32 n)\n{\n  ret;\n}\n";
        ASSERT_EQ(kcache_cache_get_module(cache_, "table", make_from, &generator_, &module_),
                  KCACHE_OK)
            << kcache_last_error_message();
        ASSERT_EQ(kcache_module_get_kernel(module_, "k", &kernel_), KCACHE_OK);
    }
    void TearDown() override {
        kcache_kernel_release(kernel_);
        kcache_module_release(module_);
        kcache_cache_destroy(cache_);
    }

    std::shared_ptr<fakes::FakeDriver> fake_ = std::make_shared<fakes::FakeDriver>();
    kcache_cache* cache_ = nullptr;
    Generator generator_;
    kcache_module* module_ = nullptr;
    kcache_kernel* kernel_ = nullptr;
    std::uint64_t out_ = 0;
    std::uint32_t n_ = 0;
    void* args_[2] = {&out_, &n_};
    const std::size_t sizes_[2] = {sizeof out_, sizeof n_};
};

TEST_F(CApiLaunchFeatures, TheExtendedLaunchPassesEveryOptionAndKeepsTheChecks) {
    kcache_launch_config config;
    kcache_launch_config_init(&config);
    EXPECT_EQ(config.grid[0], 1u);
    EXPECT_EQ(config.cluster[0], 0u);
    config.grid[0] = 8;
    config.block[0] = 64;
    config.cluster[0] = 2;
    config.cooperative = 1;
    config.programmatic_dependent_launch = 1;
    ASSERT_EQ(kcache_launch_ex(kernel_, &config, args_, sizes_, 2), KCACHE_OK)
        << kcache_last_error_message();
    const LaunchConfig seen = fake_->last_launch();
    EXPECT_EQ(seen.grid.x, 8u);
    EXPECT_EQ(seen.cluster.x, 2u);
    EXPECT_TRUE(seen.cooperative);
    EXPECT_TRUE(seen.programmatic_dependent_launch);
    const std::size_t wrong[2] = {4, 4};
    EXPECT_EQ(kcache_launch_ex(kernel_, &config, args_, wrong, 2), KCACHE_ARGUMENT_MISMATCH);
    EXPECT_EQ(kcache_launch_ex(kernel_, &config, args_, nullptr, 1), KCACHE_ARGUMENT_MISMATCH);
    EXPECT_EQ(kcache_launch_ex(kernel_, nullptr, args_, nullptr, 2), KCACHE_INVALID_ARGUMENT);
}

TEST_F(CApiLaunchFeatures, AnOlderSmallerLaunchConfigIsReadOnlyAsFarAsItReaches) {
    kcache_launch_config config;
    kcache_launch_config_init(&config);
    config.cluster[0] = 2;  // beyond what the caller's struct is said to hold
    config.cooperative = 1;
    config.struct_size = offsetof(kcache_launch_config, cluster);
    ASSERT_EQ(kcache_launch_ex(kernel_, &config, args_, nullptr, 2), KCACHE_OK);
    EXPECT_EQ(fake_->last_launch().cluster.x, 0u);
    EXPECT_FALSE(fake_->last_launch().cooperative);
    config.struct_size = sizeof(std::size_t);
    EXPECT_EQ(kcache_launch_ex(kernel_, &config, args_, nullptr, 2), KCACHE_INVALID_ARGUMENT);
}

TEST_F(CApiLaunchFeatures, SharedMemoryAbove48KiBNeedsTheAttribute) {
    kcache_launch_config config;
    kcache_launch_config_init(&config);
    config.shared_bytes = 100 * 1024;
    EXPECT_EQ(kcache_launch_ex(kernel_, &config, args_, sizes_, 2), KCACHE_DRIVER_ERROR);
    ASSERT_EQ(
        kcache_kernel_set_attribute(kernel_, KCACHE_ATTRIBUTE_MAX_DYNAMIC_SHARED_BYTES, 100 * 1024),
        KCACHE_OK);
    EXPECT_EQ(kcache_launch_ex(kernel_, &config, args_, sizes_, 2), KCACHE_OK)
        << kcache_last_error_message();
    EXPECT_EQ(kcache_kernel_set_attribute(kernel_, static_cast<kcache_kernel_attribute>(99), 1),
              KCACHE_INVALID_ARGUMENT);
    EXPECT_EQ(
        kcache_kernel_set_attribute(kernel_, KCACHE_ATTRIBUTE_MAX_DYNAMIC_SHARED_BYTES, 1 << 30),
        KCACHE_INVALID_ARGUMENT);
    EXPECT_EQ(kcache_kernel_set_cache_config(kernel_, KCACHE_PREFER_L1), KCACHE_OK);
    void* native = nullptr;
    ASSERT_EQ(kcache_kernel_native_kernel(kernel_, &native), KCACHE_OK);
    EXPECT_EQ(fake_->cache_config_of(driver::KernelId(native)), CacheConfig::kPreferL1);
}

TEST_F(CApiLaunchFeatures, NativeHandlesAndGlobalsComeOutAndMissingOnesAreErrors) {
    void* function = nullptr;
    ASSERT_EQ(kcache_kernel_native_function(kernel_, &function), KCACHE_OK);
    EXPECT_NE(function, nullptr);
    EXPECT_EQ(kcache_kernel_native_function(nullptr, &function), KCACHE_INVALID_ARGUMENT);
    EXPECT_EQ(function, nullptr) << "an out parameter is cleared when the call fails";
    std::uint64_t address = 0;
    std::size_t size = 0;
    ASSERT_EQ(kcache_module_global(module_, "table", &address, &size), KCACHE_OK);
    EXPECT_NE(address, 0u);
    EXPECT_EQ(size, 64u * 4u);
    EXPECT_EQ(kcache_module_global(module_, "nothing", &address, &size), KCACHE_INVALID_ARGUMENT);
    EXPECT_NE(std::string(kcache_last_error_message()).find("nothing"), std::string::npos);
    EXPECT_EQ(address, 0u);
}

}  // namespace
}  // namespace kcache
