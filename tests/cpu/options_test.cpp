// SPDX-License-Identifier: Apache-2.0
// compile::normalize_options: one spelling per NVRTC option for the fingerprint, and a refusal for
// options that would make something other than a loadable cubin for the cache's arch.
#include "compile/options.hpp"

#include <gtest/gtest.h>

namespace kcache::compile {
namespace {

std::vector<std::string> normalized(const std::vector<std::string>& options) {
    auto result = normalize_options(options);
    EXPECT_TRUE(result.ok()) << result.error().describe();
    return result.ok() ? *result : std::vector<std::string>{};
}

TEST(NormalizeOptions, EverySpellingOfADefineIsOne) {
    const std::vector<std::string> want = {"-DN=4"};
    EXPECT_EQ(normalized({"-DN=4"}), want);
    EXPECT_EQ(normalized({"-D N=4"}), want);
    EXPECT_EQ(normalized({"-D", "N=4"}), want);
    EXPECT_EQ(normalized({"--define-macro=N=4"}), want);
    EXPECT_EQ(normalized({"--define-macro", "N=4"}), want);
    EXPECT_EQ(normalized({"  -DN=4 "}), want);
}

TEST(NormalizeOptions, IncludePathsUndefinesAndPreIncludesAreCanonical) {
    EXPECT_EQ(normalized({"--include-path=/opt/inc", "-U", "X", "--pre-include", "a.h"}),
              (std::vector<std::string>{"-I/opt/inc", "-UX", "-include=a.h"}));
    EXPECT_EQ(normalized({"-include a.h"}), (std::vector<std::string>{"-include=a.h"}));
}

TEST(NormalizeOptions, OtherFlagsAreKeptAsGiven) {
    // "--device-debug" is an NVRTC option and "-device-debug" is not: no dash is dropped.
    EXPECT_EQ(normalized({"--device-debug", "-use_fast_math", "--std=c++17"}),
              (std::vector<std::string>{"--device-debug", "-use_fast_math", "--std=c++17"}));
}

TEST(NormalizeOptions, OrderIsKeptAndEmptyOptionsDropped) {
    EXPECT_EQ(normalized({"-DA=1", "", "  ", "-DA=2"}),
              (std::vector<std::string>{"-DA=1", "-DA=2"}));
}

TEST(NormalizeOptions, ArchOptionsAreRefusedWithTheirName) {
    for (const char* option : {"-arch=sm_80", "--gpu-architecture=sm_80", "-arch", "-gencode",
                               "--gpu-architecture compute_90", "-code=sm_90"}) {
        auto result = normalize_options({option});
        ASSERT_FALSE(result.ok()) << option;
        EXPECT_EQ(result.error().code(), Errc::kInvalidArgument);
        EXPECT_NE(result.error().message().find(option), std::string::npos);
    }
}

TEST(NormalizeOptions, RelocatableAndLtoOutputAreRefused) {
    for (const char* option : {"-rdc=true", "--relocatable-device-code=true", "-dlto", "-dc",
                               "--device-c", "-fdevice-syntax-only"}) {
        auto result = normalize_options({option});
        ASSERT_FALSE(result.ok()) << option;
        EXPECT_EQ(result.error().code(), Errc::kInvalidArgument);
    }
    EXPECT_TRUE(normalize_options({"-rdc=false"}).ok());
    EXPECT_FALSE(normalize_options({"-rdc", "true"}).ok());
    EXPECT_FALSE(normalize_options({"--relocatable-device-code", "true"}).ok());
    EXPECT_TRUE(normalize_options({"-rdc", "false"}).ok());
}

TEST(NormalizeOptions, AValuedOptionAtTheEndLacksItsValue) {
    auto result = normalize_options({"-DX=1", "-D"});
    ASSERT_FALSE(result.ok());
    EXPECT_NE(result.error().message().find("lacks its value"), std::string::npos);
}

TEST(NormalizeOptions, LineJoinsWithSpacesAndNeverBreaks) {
    EXPECT_EQ(options_line({"-DA=1", "-use_fast_math"}), "-DA=1 -use_fast_math");
    EXPECT_EQ(options_line({"-DA=1\n2"}), "-DA=1 2");
}

TEST(LeanRecipeAllows, OptionsOfTheFrontEndAlone) {
    auto normalized =
        normalize_options({"-D", "N=4", "--define-macro=M", "-I/opt/include", "-include", "pre.h",
                           "-UX", "-std=c++17", "--std=c++20", "--expt-relaxed-constexpr",
                           "-default-device", "--diag-suppress=177", "-w"});
    ASSERT_TRUE(normalized.ok()) << normalized.error().describe();
    EXPECT_TRUE(lean_recipe_allows(*normalized));
    EXPECT_TRUE(lean_recipe_allows({}));
}

TEST(LeanRecipeAllows, NotOptionsThatMayReachPtxasNorMathNorUnknownOnes) {
    for (const char* option :
         {"-G", "--device-debug", "-lineinfo", "--generate-line-info", "-Xptxas=-v",
          "--ptxas-options=-O1", "--maxrregcount=64", "-maxrregcount=32", "--dopt=on", "-Ofc=max",
          "--extra-device-vectorization", "-ewp", "-use_fast_math", "--ftz=true", "-prec-div=false",
          "-prec-sqrt=false", "-fmad=false", "--some-future-option"}) {
        EXPECT_FALSE(lean_recipe_allows({"-DN=4", option})) << option;
    }
}

TEST(LeanRecipeAllows, APrefixOfAKnownOptionIsNotEnough) {
    EXPECT_FALSE(lean_recipe_allows({"-stdx"}));
    EXPECT_FALSE(lean_recipe_allows({"-wx"}));
}

}  // namespace
}  // namespace kcache::compile
