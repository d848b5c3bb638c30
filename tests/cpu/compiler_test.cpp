// SPDX-License-Identifier: Apache-2.0
// The compile layer with the machine's real NVRTC and nvJitLink: no GPU is needed to compile.
// Skipped where the CUDA toolkit's libraries are missing.
#include "compile/compiler.hpp"

#include <elf.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "driver/compiler_api.hpp"
#include "ptx_kernels.hpp"
#include "test_support.hpp"

namespace kcache::compile {
namespace {

CudaProgram program_of(std::string code, std::string name = "kernel.cu") {
    CudaProgram program;
    program.name = std::move(name);
    program.code = std::move(code);
    return program;
}

bool is_elf(const std::string& bytes) {
    return bytes.rfind(
               "\x7f"
               "ELF",
               0) == 0;
}

class NvrtcTest : public ::testing::Test {
protected:
    void SetUp() override {
        if (!driver::nvrtc_api().ok()) {
            GTEST_SKIP() << driver::nvrtc_api().error().describe();
        }
    }
};

class NvJitLinkTest : public ::testing::Test {
protected:
    void SetUp() override {
        if (!driver::nvjitlink_api().ok()) {
            GTEST_SKIP() << driver::nvjitlink_api().error().describe();
        }
    }
};

const char* const kScale = R"(
extern "C" __global__ void scale(float* data, float factor, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) data[i] *= factor;
}
)";

TEST_F(NvrtcTest, CompilesCudaCppToACubinForTheNamedArch) {
    auto compiled = compile_cuda(program_of(kScale, "scale.cu"), Target{90, false});
    ASSERT_TRUE(compiled.ok()) << compiled.error().describe();
    EXPECT_TRUE(is_elf(compiled->cubin));
    EXPECT_NE(compiled->cubin.find("scale"), std::string::npos);
}

TEST_F(NvrtcTest, ArchSpecificTargetCompiles) {
    auto compiled = compile_cuda(program_of(kScale, "scale.cu"), Target{90, true});
    ASSERT_TRUE(compiled.ok()) << compiled.error().describe();
    EXPECT_TRUE(is_elf(compiled->cubin));
}

TEST_F(NvrtcTest, DifferentArchsGiveDifferentCubins) {
    auto sm80 = compile_cuda(program_of(kScale), Target{80, false});
    auto sm90 = compile_cuda(program_of(kScale), Target{90, false});
    ASSERT_TRUE(sm80.ok() && sm90.ok());
    EXPECT_NE(sm80->cubin, sm90->cubin);
}

TEST_F(NvrtcTest, CompileErrorReturnsTheCompilerLog) {
    auto compiled = compile_cuda(
        program_of("__global__ void k() { undeclared_thing(); }", "broken.cu"), Target{90, false});
    ASSERT_FALSE(compiled.ok());
    EXPECT_EQ(compiled.error().code(), Errc::kCompileFailed);
    EXPECT_NE(compiled.error().log().find("undeclared_thing"), std::string::npos)
        << compiled.error().describe();
    EXPECT_NE(compiled.error().message().find("broken.cu"), std::string::npos);
}

TEST_F(NvrtcTest, HeadersArePassedAsStrings) {
    CudaProgram program = program_of(
        "#include \"factor.h\"\n"
        "extern \"C\" __global__ void k(float* d) { d[0] *= FACTOR; }\n",
        "with_header.cu");
    program.headers = {{"factor.h", "#define FACTOR 3.0f\n"}};
    auto compiled = compile_cuda(program, Target{90, false});
    ASSERT_TRUE(compiled.ok()) << compiled.error().describe();
}

TEST_F(NvrtcTest, OptionsReachTheCompiler) {
    CudaProgram program = program_of(
        "#ifndef REQUIRED\n#error REQUIRED is not defined\n#endif\n"
        "extern \"C\" __global__ void k() {}\n");
    EXPECT_FALSE(compile_cuda(program, Target{90, false}).ok());
    program.options = {"-DREQUIRED=1"};
    EXPECT_TRUE(compile_cuda(program, Target{90, false}).ok());
}

TEST_F(NvrtcTest, NameExpressionsResolveTemplatesToLoweredNames) {
    CudaProgram program =
        program_of("template <typename T, int N> __global__ void fill(T* d) { d[N] = T(N); }\n");
    program.name_expressions = {"fill<float, 4>", "fill<int, 2>"};
    auto compiled = compile_cuda(program, Target{90, false});
    ASSERT_TRUE(compiled.ok()) << compiled.error().describe();
    ASSERT_EQ(compiled->lowered_names.size(), 2u);
    const std::string& lowered = compiled->lowered_names.at("fill<float, 4>");
    EXPECT_EQ(lowered.rfind("_Z", 0), 0u) << lowered;
    EXPECT_NE(lowered, compiled->lowered_names.at("fill<int, 2>"));
    EXPECT_NE(compiled->cubin.find(lowered), std::string::npos);
}

// Both compilers: the lean recipe (NVRTC's LTO IR, linked by nvJitLink) needs nvJitLink.
class LeanRecipeTest : public NvrtcTest {
protected:
    void SetUp() override {
        NvrtcTest::SetUp();
        if (IsSkipped()) return;
        if (!driver::nvjitlink_api().ok()) {
            GTEST_SKIP() << driver::nvjitlink_api().error().describe();
        }
    }
};

// Static constexpr members, the kind libcu++'s headers declare by the hundred, and device
// variables nothing reads: NVRTC emits each as an internal .global.
const char* const kWithUnusedGlobals = R"(
struct Limits { static constexpr int digits = 24; static constexpr float eps = 1e-7f; };
static __device__ int unused_table[4] = {1, 2, 3, 4};
__device__ int named_only = 3;
__device__ int written_by_code = 0;
extern "C" __global__ void k(int* out) { *out = Limits::digits + atomicAdd(&written_by_code, 1); }
)";

TEST_F(LeanRecipeTest, CubinLeavesOutGlobalsNothingUses) {
    CudaProgram program = program_of(kWithUnusedGlobals);
    program.options = {"-std=c++17", "-DUNUSED=1"};
    auto compiled = compile_cuda(program, Target{90, false});
    ASSERT_TRUE(compiled.ok()) << compiled.error().describe();
    EXPECT_TRUE(is_elf(compiled->cubin));
    EXPECT_EQ(compiled->cubin.find("_ZN6Limits6digitsE"), std::string::npos);
    EXPECT_EQ(compiled->cubin.find("unused_table"), std::string::npos);
    EXPECT_NE(compiled->cubin.find("written_by_code"), std::string::npos);
    EXPECT_NE(compiled->cubin.find(".text.k"), std::string::npos);
}

// CUB's block reduce over 128 threads, with the toolkit's headers under `root`.
CudaProgram cub_block_sum(const std::string& root) {
    CudaProgram program = program_of(
        "#include <cub/block/block_reduce.cuh>\n"
        "extern \"C\" __global__ void block_sum(float* out, const float* in) {\n"
        "    using Reduce = cub::BlockReduce<float, 128>;\n"
        "    __shared__ typename Reduce::TempStorage storage;\n"
        "    float v = Reduce(storage).Sum(in[blockIdx.x * 128 + threadIdx.x]);\n"
        "    if (threadIdx.x == 0) out[blockIdx.x] = v;\n}\n");
    program.options = {"-std=c++17", "-I" + root + "/cccl", "-I" + root};
    return program;
}

// The case that made the recipe: CUB's block reduce, whose headers bring some 800 constants that
// cost the driver 3-5 ms at every load of NVRTC's own cubin (H200).
TEST_F(LeanRecipeTest, CubKernelCarriesNoHeaderConstants) {
    const std::string root = "/usr/local/cuda/include";
    if (!std::filesystem::exists(root + "/cccl/cub")) GTEST_SKIP() << "no CUB under " << root;
    const CudaProgram program = cub_block_sum(root);
    auto compiled = compile_cuda(program, Target{90, false});
    ASSERT_TRUE(compiled.ok()) << compiled.error().describe();
    EXPECT_EQ(compiled->cubin.find("numeric_limits"), std::string::npos);
    EXPECT_LT(compiled->cubin.size(), 32u * 1024) << "NVRTC's own cubin is about 120 KiB";
    EXPECT_NE(compiled->cubin.find(".text.block_sum"), std::string::npos);
}

TEST_F(LeanRecipeTest, AGlobalANameExpressionAsksForIsKept) {
    CudaProgram program = program_of(kWithUnusedGlobals);
    program.name_expressions = {"&named_only"};
    auto compiled = compile_cuda(program, Target{90, false});
    ASSERT_TRUE(compiled.ok()) << compiled.error().describe();
    const std::string& lowered = compiled->lowered_names.at("&named_only");
    EXPECT_NE(compiled->cubin.find(lowered), std::string::npos) << lowered;
}

TEST_F(LeanRecipeTest, AnOptionThatMayReachPtxasKeepsNvrtcsOwnCubin) {
    CudaProgram program = program_of(kWithUnusedGlobals);
    program.options = {"--maxrregcount=64"};
    auto compiled = compile_cuda(program, Target{90, false});
    ASSERT_TRUE(compiled.ok()) << compiled.error().describe();
    EXPECT_NE(compiled->cubin.find("_ZN6Limits6digitsE"), std::string::npos);
}

TEST_F(LeanRecipeTest, ArchSpecificTargetCompiles) {
    auto compiled = compile_cuda(program_of(kWithUnusedGlobals), Target{90, true});
    ASSERT_TRUE(compiled.ok()) << compiled.error().describe();
    EXPECT_TRUE(is_elf(compiled->cubin));
    EXPECT_EQ(compiled->cubin.find("unused_table"), std::string::npos);
}

// A section's bytes from an ELF64 file such as a cubin; empty if there is none by that name.
std::string section(const std::string& elf, const std::string& name) {
    if (elf.size() < sizeof(Elf64_Ehdr)) return {};
    Elf64_Ehdr header;
    std::memcpy(&header, elf.data(), sizeof header);
    auto section_header = [&](std::size_t i) {
        Elf64_Shdr out{};
        std::memcpy(&out, elf.data() + header.e_shoff + i * sizeof(Elf64_Shdr), sizeof out);
        return out;
    };
    const Elf64_Shdr names = section_header(header.e_shstrndx);
    for (std::size_t i = 0; i < header.e_shnum; ++i) {
        const Elf64_Shdr s = section_header(i);
        if (elf.compare(names.sh_offset + s.sh_name, name.size() + 1, name.c_str(),
                        name.size() + 1) == 0) {
            return elf.substr(s.sh_offset, s.sh_size);
        }
    }
    return {};
}

// Instructions (16 bytes on sm_90) that differ between two code sections of one size.
int differing_instructions(const std::string& a, const std::string& b) {
    int count = 0;
    for (std::size_t at = 0; at + 16 <= a.size(); at += 16) {
        count += a.compare(at, 16, b, at, 16) != 0 ? 1 : 0;
    }
    return count;
}

// The lean recipe must run the code NVRTC would have made: the same instructions, but for a
// data address that moves when the linker leaves unused variables out (sinf's table, here). Math
// options keep NVRTC's own cubin (see lean_recipe_allows), so they are not compared.
TEST_F(LeanRecipeTest, LeanCubinRunsTheCodeOfNvrtcsOwn) {
    const char* const math = R"(
extern "C" __global__ void mathy(float* out, const float* a, const float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = sqrtf(a[i]) / b[i] + expf(a[i] * b[i]) + sinf(b[i]) * a[i] + 1.0f;
}
)";
    for (const std::vector<std::string>& options :
         {std::vector<std::string>{}, {"-std=c++17", "-DSCALE=2"}, {"-default-device"}}) {
        CudaProgram program = program_of(math);
        program.options = options;
        auto lean = compile_cuda(program, Target{90, false});
        auto own = compile_cuda(program, Target{90, false}, CudaRecipe::kNvrtcCubin);
        ASSERT_TRUE(lean.ok() && own.ok());
        const std::string lean_text = section(lean->cubin, ".text.mathy");
        const std::string own_text = section(own->cubin, ".text.mathy");
        ASSERT_FALSE(own_text.empty());
        const std::string label = options.empty() ? "no options" : options.back();
        ASSERT_EQ(lean_text.size(), own_text.size()) << label;
        EXPECT_LE(differing_instructions(lean_text, own_text), 1) << label;
    }
}

TEST_F(LeanRecipeTest, CubKernelIsTheSameCodeAsNvrtcsOwn) {
    const std::string root = "/usr/local/cuda/include";
    if (!std::filesystem::exists(root + "/cccl/cub")) GTEST_SKIP() << "no CUB under " << root;
    const CudaProgram program = cub_block_sum(root);
    auto lean = compile_cuda(program, Target{90, false});
    auto own = compile_cuda(program, Target{90, false}, CudaRecipe::kNvrtcCubin);
    ASSERT_TRUE(lean.ok() && own.ok());
    EXPECT_EQ(section(lean->cubin, ".text.block_sum"), section(own->cubin, ".text.block_sum"));
    EXPECT_GT(own->cubin.size(), 4 * lean->cubin.size()) << "the header constants stayed";
}

TEST_F(NvJitLinkTest, LinksPtxToACubin) {
    auto linked = link_ptx(examples::residual_add_ptx(), Target{90, false});
    ASSERT_TRUE(linked.ok()) << linked.error().describe();
    EXPECT_TRUE(is_elf(linked->cubin));
    EXPECT_NE(linked->cubin.find("residual_add"), std::string::npos);
}

TEST_F(NvJitLinkTest, BadPtxReturnsTheLinkerLog) {
    const std::string bad =
        ".version 7.8\n.target sm_70\n.address_size 64\n"
        ".visible .entry broken()\n{\n  add.f32 %f1, %f2, %nope;\n  ret;\n}\n";
    auto linked = link_ptx(bad, Target{90, false});
    ASSERT_FALSE(linked.ok());
    EXPECT_EQ(linked.error().code(), Errc::kCompileFailed);
    EXPECT_NE(linked.error().log().find("nope"), std::string::npos) << linked.error().describe();
}

TEST(CompileTarget, NamesArchAndArchSpecificVariant) {
    EXPECT_EQ((Target{90, false}.name()), "sm_90");
    EXPECT_EQ((Target{90, true}.name()), "sm_90a");
    EXPECT_EQ((Target{120, false}.name()), "sm_120");
}

// Headers NVRTC reads from disk: only those a fingerprint covers (strings, the toolkit's) pass.
class DiskHeaderTest : public NvrtcTest {
protected:
    void SetUp() override {
        NvrtcTest::SetUp();
        header_ = temp_.path() + "/on_disk.h";
        std::ofstream(header_) << "#define FROM_DISK 7\n";
    }
    CudaProgram including_it() const {
        return program_of("#include \"" + header_ +
                          "\"\nextern \"C\" __global__ void k(int* p) { *p = FROM_DISK; }\n");
    }
    test::TempDir temp_;
    std::string header_;
};

TEST_F(DiskHeaderTest, AnAbsoluteIncludeOfAFileOnDiskIsRefusedNamingTheFile) {
    auto compiled = compile_cuda(including_it(), Target{90, false});
    ASSERT_FALSE(compiled.ok());
    EXPECT_EQ(compiled.error().code(), Errc::kInvalidArgument);
    EXPECT_NE(compiled.error().message().find(header_), std::string::npos)
        << compiled.error().message();
    EXPECT_NE(compiled.error().message().find("allow_disk_headers"), std::string::npos);
}

TEST_F(DiskHeaderTest, WithTheOptInItCompilesAndSaysWhatItRead) {
    CudaProgram program = including_it();
    program.allow_disk_headers = true;
    auto compiled = compile_cuda(program, Target{90, false});
    ASSERT_TRUE(compiled.ok()) << compiled.error().describe();
    EXPECT_TRUE(is_elf(compiled->cubin));
    EXPECT_EQ(compiled->disk_headers, std::vector<std::string>{header_});
}

TEST_F(DiskHeaderTest, AHeaderPassedAsAStringUnderTheSameNameIsNoDiskRead) {
    CudaProgram program = including_it();
    program.headers = {{header_, "#define FROM_DISK 8\n"}};
    auto compiled = compile_cuda(program, Target{90, false});
    ASSERT_TRUE(compiled.ok()) << compiled.error().describe();
    EXPECT_TRUE(compiled->disk_headers.empty());
}

TEST_F(DiskHeaderTest, ASearchFolderOutsideTheToolkitIsRefusedBeforeItSuppliesAnything) {
    for (const std::vector<std::string>& options : {std::vector<std::string>{"-I" + temp_.path()},
                                                    {"--include-path", temp_.path()},
                                                    {"-include", header_},
                                                    {"--pch"},
                                                    {"--use-pch=" + temp_.path() + "/x.pch"}}) {
        CudaProgram program = program_of("extern \"C\" __global__ void k() {}\n");
        program.options = options;
        auto compiled = compile_cuda(program, Target{90, false});
        ASSERT_FALSE(compiled.ok()) << options.front();
        EXPECT_EQ(compiled.error().code(), Errc::kInvalidArgument) << options.front();
        EXPECT_NE(compiled.error().message().find("allow_disk_headers"), std::string::npos);
        program.allow_disk_headers = true;
        if (options.front().find("pch") != std::string::npos) continue;  // NVRTC's own rules
        EXPECT_TRUE(compile_cuda(program, Target{90, false}).ok()) << options.front();
    }
}

TEST_F(DiskHeaderTest, APreIncludedStringHeaderIsNoDiskRead) {
    CudaProgram program = program_of("extern \"C\" __global__ void k(int* p) { *p = PRE; }\n");
    program.headers = {{"pre.h", "#define PRE 3\n"}};
    program.options = {"-include", "pre.h"};
    auto compiled = compile_cuda(program, Target{90, false});
    ASSERT_TRUE(compiled.ok()) << compiled.error().describe();
}

TEST_F(DiskHeaderTest, ToolkitHeadersAreCoveredByTheCompilersIdentity) {
    const std::string root = "/usr/local/cuda/include";
    if (!std::filesystem::exists(root + "/cccl/cuda/std/type_traits")) GTEST_SKIP();
    CudaProgram program = program_of(
        "#include <cuda/std/type_traits>\n#include <cuda_fp16.h>\n"
        "extern \"C\" __global__ void k(int* p) { *p = cuda::std::is_same_v<int, int>; }\n");
    program.options = {"-std=c++17", "-I" + root + "/cccl", "-I" + root};
    auto compiled = compile_cuda(program, Target{90, false});
    ASSERT_TRUE(compiled.ok()) << compiled.error().describe();
    EXPECT_TRUE(compiled->disk_headers.empty());
    ASSERT_TRUE(cuda_compiler_identity().ok());
    EXPECT_NE(cuda_compiler_identity()->find(toolkit_include_folder()), std::string::npos);
}

TEST_F(DiskHeaderTest, DotDotOutOfTheToolkitFolderIsStillADiskRead) {
    const std::string root = "/usr/local/cuda/include";
    if (!std::filesystem::exists(root)) GTEST_SKIP();
    std::string climb;
    for (int i = 0; i < 16; ++i) climb += "../";
    CudaProgram program =
        program_of("#include <" + climb + header_.substr(1) +
                   ">\nextern \"C\" __global__ void k(int* p) { *p = FROM_DISK; }\n");
    program.options = {"-I" + root};
    auto compiled = compile_cuda(program, Target{90, false});
    ASSERT_FALSE(compiled.ok());
    EXPECT_EQ(compiled.error().code(), Errc::kInvalidArgument) << compiled.error().describe();
}

// cooperative_groups/details/driver_abi.h says #include "info.h": a quoted include is looked up
// beside the header that says it, which NVRTC's --no-source-include turns off for every header.
TEST_F(DiskHeaderTest, AQuotedIncludeInAToolkitHeaderIsFoundBesideIt) {
    const std::string root = "/usr/local/cuda/include";
    if (!std::filesystem::exists(root + "/cooperative_groups/details/driver_abi.h") ||
        !std::filesystem::exists(root + "/cccl/cuda/std/type_traits")) {
        GTEST_SKIP() << "no cooperative_groups or CCCL under " << root;
    }
    CudaProgram program = program_of(
        "#include <cooperative_groups.h>\n#include <cooperative_groups/reduce.h>\n"
        "namespace cg = cooperative_groups;\n"
        "extern \"C\" __global__ void k(int* p) {\n"
        "    auto warp = cg::tiled_partition<32>(cg::this_thread_block());\n"
        "    p[0] = cg::reduce(warp, static_cast<int>(threadIdx.x), cg::plus<int>());\n}\n");
    program.options = {"-std=c++17", "-I" + root + "/cccl", "-I" + root};
    auto compiled = compile_cuda(program, Target{90, true});
    ASSERT_TRUE(compiled.ok()) << compiled.error().describe();
    EXPECT_TRUE(compiled->disk_headers.empty());
}

// The working folder's header is a disk read like any other: refused without the opt-in, named.
TEST_F(DiskHeaderTest, AQuotedIncludeFoundInTheWorkingFolderIsADiskRead) {
    std::ofstream(temp_.path() + "/beside.h") << "#define BESIDE 5\n";
    const std::filesystem::path before = std::filesystem::current_path();
    std::filesystem::current_path(temp_.path());
    CudaProgram program = program_of(
        "#include \"beside.h\"\nextern \"C\" __global__ void k(int* p) { *p = BESIDE; }\n");
    auto refused = compile_cuda(program, Target{90, false});
    program.allow_disk_headers = true;
    auto allowed = compile_cuda(program, Target{90, false});
    std::filesystem::current_path(before);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().code(), Errc::kInvalidArgument) << refused.error().describe();
    EXPECT_NE(refused.error().message().find("beside.h"), std::string::npos)
        << refused.error().message();
    ASSERT_TRUE(allowed.ok()) << allowed.error().describe();
    ASSERT_EQ(allowed->disk_headers.size(), 1u);
    EXPECT_NE(allowed->disk_headers[0].find("beside.h"), std::string::npos);
}

TEST(HeaderTrace, NamesEveryProcessedHeaderInOrder) {
    const std::string trace =
        R"json({"otherData": {"isNVRTC": 1}, "traceEvents": [ {},)json"
        R"json( {"args":{"detail":"__nv_nvrtc_builtin_header.h"},"dur":3,"name":"Processing Header File","ph":"X"},)json"
        R"json( {"args":{"detail":"k(int *)"},"name":"Scanning Function Body"},)json"
        R"json( {"name":"Processing Header File","args":{"detail":"\/tmp\/a \"b\".h"}},)json"
        R"json( {"name":"Processing Header File","args":{"detail":"\u00fc.h"}}]})json";
    auto headers = headers_in_trace(trace);
    ASSERT_TRUE(headers.has_value());
    EXPECT_EQ(*headers, (std::vector<std::string>{"__nv_nvrtc_builtin_header.h", "/tmp/a \"b\".h",
                                                  "\xc3\xbc.h"}));
}

TEST(HeaderTrace, AnythingElseIsNoTrace) {
    const std::string deep(70, '[');
    for (
        std::string_view text : std::vector<std::string_view>{
            std::string_view(""), std::string_view("{"), std::string_view("[]"),
            R"json({"traceEvents": []})json",
            R"json({"traceEvents": [{"name":"Processing Header File","args":{"detail":"x.h"}}]})json",
            R"json({"traceEvents": [{"name":"Processing Header File","args":{"detail":"__nv_nvrtc_builtin_header.h"}}]} x)json",
            std::string_view(deep)}) {
        EXPECT_FALSE(headers_in_trace(text).has_value()) << text;
    }
}

}  // namespace
}  // namespace kcache::compile
