// SPDX-License-Identifier: Apache-2.0
// The NVRTC and nvJitLink loaders (groundwork for compiling without a GPU): on this machine the
// CUDA toolkit is installed, so both must load, report their versions and resolve every symbol;
// a missing library must be a clear error, not a crash.
#include "driver/compiler_api.hpp"

#include <gtest/gtest.h>

#include <cstdlib>

namespace kcache::driver {
namespace {

TEST(CompilerApi, NvrtcLoadsAndReportsItsVersion) {
    const auto& api = nvrtc_api();
    if (!api.ok() && std::getenv("KCACHE_REQUIRE_TOOLKIT") == nullptr) {
        GTEST_SKIP() << "no NVRTC here: " << api.error().describe();
    }
    ASSERT_TRUE(api.ok()) << api.error().describe();
    EXPECT_GE((*api)->major, 12);
    EXPECT_FALSE((*api)->library_path.empty());
    EXPECT_NE((*api)->nvrtcCompileProgram, nullptr);
}

TEST(CompilerApi, NvJitLinkLoadsAndReportsItsVersion) {
    const auto& api = nvjitlink_api();
    if (!api.ok() && std::getenv("KCACHE_REQUIRE_TOOLKIT") == nullptr) {
        GTEST_SKIP() << "no nvJitLink here: " << api.error().describe();
    }
    ASSERT_TRUE(api.ok()) << api.error().describe();
    EXPECT_GE((*api)->major, 12u);
    EXPECT_NE((*api)->complete, nullptr);
}

}  // namespace
}  // namespace kcache::driver
