// SPDX-License-Identifier: Apache-2.0
// driver::NvrtcProgram and driver::NvJitLinkSession, the CUDA-free interface src/compile compiles
// through: typed results, NVRTC's and nvJitLink's own words in the errors, move-only owners, and
// a clear error (never a crash) where a library is missing.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "compile/compiler.hpp"
#include "driver/compiler_libraries.hpp"
#include "driver/nvjitlink.hpp"
#include "driver/nvrtc.hpp"
#include "ptx_kernels.hpp"
#include "test_support.hpp"

namespace kcache::driver {
namespace {

static_assert(!std::is_copy_constructible_v<NvrtcProgram>);
static_assert(!std::is_copy_assignable_v<NvrtcProgram>);
static_assert(std::is_nothrow_move_constructible_v<NvrtcProgram>);
static_assert(std::is_nothrow_move_assignable_v<NvrtcProgram>);
static_assert(!std::is_copy_constructible_v<NvJitLinkSession>);
static_assert(!std::is_copy_assignable_v<NvJitLinkSession>);
static_assert(std::is_nothrow_move_constructible_v<NvJitLinkSession>);
static_assert(std::is_nothrow_move_assignable_v<NvJitLinkSession>);

constexpr const char* kScale = R"(
extern "C" __global__ void scale(float* x, float by, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= by;
}
template <int N> __global__ void fill(int* x) { x[threadIdx.x] = N; }
)";

class NvrtcProgramTest : public ::testing::Test {
protected:
    void SetUp() override {
        if (!nvrtc_usable()) GTEST_SKIP() << nvrtc_usable().error().describe();
    }
};

TEST_F(NvrtcProgramTest, CompilesToACubinAndLowersANameExpression) {
    auto program = NvrtcProgram::create(kScale, "scale.cu", {});
    ASSERT_TRUE(program.ok()) << program.error().describe();
    ASSERT_TRUE(program->add_name_expression("fill<3>").ok());
    const NvrtcCompile compiled = program->compile({"-arch=sm_90", "--no-source-include"});
    ASSERT_EQ(compiled.status, NvrtcCompile::Status::kSucceeded) << compiled.log;
    EXPECT_TRUE(compiled.error.empty());
    auto lowered = program->lowered_name("fill<3>");
    ASSERT_TRUE(lowered.ok()) << lowered.error().describe();
    EXPECT_EQ(*lowered, "_Z4fillILi3EEvPi");
    auto cubin = program->cubin();
    ASSERT_TRUE(cubin.ok()) << cubin.error().describe();
    EXPECT_EQ(cubin->substr(0, 4),
              "\x7f"
              "ELF");
}

TEST_F(NvrtcProgramTest, HeadersPassedAsStringsAreIncluded) {
    auto program =
        NvrtcProgram::create("#include \"by.h\"\n__global__ void k(float* x) { *x = kBy; }", "k.cu",
                             {{"by.h", "constexpr float kBy = 2.0f;"}});
    ASSERT_TRUE(program.ok()) << program.error().describe();
    const NvrtcCompile compiled = program->compile({"-arch=sm_90", "--no-source-include"});
    EXPECT_EQ(compiled.status, NvrtcCompile::Status::kSucceeded) << compiled.log;
}

TEST_F(NvrtcProgramTest, ACompileErrorIsAFailureWithNvrtcsLog) {
    auto program = NvrtcProgram::create("__global__ void k() { undeclared(); }", "bad.cu", {});
    ASSERT_TRUE(program.ok()) << program.error().describe();
    const NvrtcCompile compiled = program->compile({"-arch=sm_90"});
    EXPECT_EQ(compiled.status, NvrtcCompile::Status::kFailed);
    EXPECT_EQ(compiled.error, "NVRTC_ERROR_COMPILATION");
    EXPECT_NE(compiled.log.find("undeclared"), std::string::npos) << compiled.log;
}

TEST_F(NvrtcProgramTest, AnUnknownOptionIsAnInvalidOption) {
    auto program = NvrtcProgram::create(kScale, "scale.cu", {});
    ASSERT_TRUE(program.ok()) << program.error().describe();
    const NvrtcCompile compiled = program->compile({"-arch=sm_90", "--no-such-option"});
    EXPECT_EQ(compiled.status, NvrtcCompile::Status::kInvalidOption);
    EXPECT_EQ(compiled.error, "NVRTC_ERROR_INVALID_OPTION");
}

TEST_F(NvrtcProgramTest, ANameNeverAddedIsAnErrorNamingTheCall) {
    auto program = NvrtcProgram::create(kScale, "scale.cu", {});
    ASSERT_TRUE(program.ok()) << program.error().describe();
    ASSERT_EQ(program->compile({"-arch=sm_90"}).status, NvrtcCompile::Status::kSucceeded);
    auto lowered = program->lowered_name("fill<4>");
    ASSERT_FALSE(lowered.ok());
    EXPECT_EQ(lowered.error().code(), Errc::kCompileFailed);
    EXPECT_EQ(lowered.error().message().rfind("nvrtcGetLoweredName(fill<4>): NVRTC_ERROR_", 0), 0u)
        << lowered.error().message();
}

TEST_F(NvrtcProgramTest, AMovedProgramCompilesAndIsDestroyedOnce) {
    auto created = NvrtcProgram::create(kScale, "scale.cu", {});
    ASSERT_TRUE(created.ok()) << created.error().describe();
    NvrtcProgram moved = std::move(*created);
    auto other = NvrtcProgram::create(kScale, "other.cu", {});
    ASSERT_TRUE(other.ok());
    *other = std::move(moved);  // the other's program is destroyed here, this one moves in
    EXPECT_EQ(other->compile({"-arch=sm_90"}).status, NvrtcCompile::Status::kSucceeded);
    auto lto = other->lto_ir();  // compiled for a real arch without -dlto: no LTO IR
    EXPECT_FALSE(lto.ok());
}

class NvJitLinkSessionTest : public ::testing::Test {
protected:
    void SetUp() override {
        if (!nvjitlink_usable()) GTEST_SKIP() << nvjitlink_usable().error().describe();
    }
};

std::string with_nul(const std::string& ptx) {
    return std::string(ptx.c_str(), ptx.size() + 1);
}

TEST_F(NvJitLinkSessionTest, LinksPtxToACubin) {
    auto session = NvJitLinkSession::create({"-arch=sm_90"});
    ASSERT_TRUE(session.ok()) << session.error().describe();
    ASSERT_TRUE(session->add(LinkInput::kPtx, with_nul(examples::gelu_ptx()), "gelu.ptx").ok());
    auto completed = session->complete();
    ASSERT_TRUE(completed.ok()) << completed.error().describe();
    auto cubin = session->cubin();
    ASSERT_TRUE(cubin.ok()) << cubin.error().describe();
    EXPECT_EQ(cubin->substr(0, 4),
              "\x7f"
              "ELF");
}

TEST_F(NvJitLinkSessionTest, BadPtxFailsWithTheStepAndNvJitLinksLog) {
    auto session = NvJitLinkSession::create({"-arch=sm_90"});
    ASSERT_TRUE(session.ok()) << session.error().describe();
    const std::string bad = with_nul(".version 8.0\n.target sm_90\n.address_size 64\nnonsense;\n");
    auto added = session->add(LinkInput::kPtx, bad, "bad.ptx");
    Result<void> failed = added.ok() ? session->complete() : std::move(added);
    ASSERT_FALSE(failed.ok());
    EXPECT_EQ(failed.error().code(), Errc::kCompileFailed);
    EXPECT_NE(failed.error().message().find(" failed (nvJitLink error "), std::string::npos)
        << failed.error().message();
    EXPECT_FALSE(failed.error().log().empty());
}

// A library named by its environment variable but missing: every way in says so, as
// kUnsupported, and nothing crashes. A fresh process each, since the libraries are found once.
TEST(CompilerLibraries, AMissingNvrtcIsUnsupportedAndSaysWhatWasLookedFor) {
    if (const char* named = std::getenv("KCACHE_TEST_MISSING_NVRTC")) {
        auto program = NvrtcProgram::create(kScale, "scale.cu", {});
        ASSERT_FALSE(program.ok());
        EXPECT_EQ(program.error().code(), Errc::kUnsupported);
        EXPECT_NE(program.error().message().find("NVRTC not found: KCACHE_NVRTC_LIBRARY=" +
                                                 std::string(named) + " cannot be read"),
                  std::string::npos)
            << program.error().message();
        EXPECT_FALSE(nvrtc_usable().ok());
        compile::CudaProgram source;
        source.code = kScale;
        auto compiled = compile::compile_cuda(source, compile::Target{});
        ASSERT_FALSE(compiled.ok());
        EXPECT_EQ(compiled.error().code(), Errc::kUnsupported);
        EXPECT_EQ(compiled.error().message(), program.error().message());
        return;
    }
    test::TempDir temp;
    const std::string missing = temp.path() + "/libnvrtc.so.13";
    EXPECT_EQ(
        test::run_self("CompilerLibraries.AMissingNvrtcIsUnsupportedAndSaysWhatWasLookedFor",
                       {"KCACHE_TEST_MISSING_NVRTC=" + missing, "KCACHE_NVRTC_LIBRARY=" + missing}),
        0);
}

TEST(CompilerLibraries, AMissingNvJitLinkIsUnsupportedAndSaysWhatWasLookedFor) {
    if (const char* named = std::getenv("KCACHE_TEST_MISSING_NVJITLINK")) {
        auto session = NvJitLinkSession::create({"-arch=sm_90"});
        ASSERT_FALSE(session.ok());
        EXPECT_EQ(session.error().code(), Errc::kUnsupported);
        EXPECT_NE(session.error().message().find("nvJitLink not found: KCACHE_NVJITLINK_LIBRARY=" +
                                                 std::string(named) + " cannot be read"),
                  std::string::npos)
            << session.error().message();
        auto linked = compile::link_ptx(examples::gelu_ptx(), compile::Target{});
        ASSERT_FALSE(linked.ok());
        EXPECT_EQ(linked.error().code(), Errc::kUnsupported);
        EXPECT_EQ(linked.error().message(), session.error().message());
        return;
    }
    test::TempDir temp;
    const std::string missing = temp.path() + "/libnvJitLink.so.13";
    EXPECT_EQ(
        test::run_self(
            "CompilerLibraries.AMissingNvJitLinkIsUnsupportedAndSaysWhatWasLookedFor",
            {"KCACHE_TEST_MISSING_NVJITLINK=" + missing, "KCACHE_NVJITLINK_LIBRARY=" + missing}),
        0);
}

}  // namespace
}  // namespace kcache::driver
