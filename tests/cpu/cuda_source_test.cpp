// SPDX-License-Identifier: Apache-2.0
// CUDA C++ through the cache: compiled on the host by the real NVRTC, kept in the tiers under a
// fingerprint that covers code, headers, normalized options and name expressions, and found again
// by name expression in a new process. The fake driver loads the real cubins (by section name).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "driver/compiler_api.hpp"
#include "kcache/kcache.hpp"
#include "test_support.hpp"
#include "testing/fake_driver.hpp"

extern char** environ;

namespace kcache {
namespace {

namespace fs = std::filesystem;

constexpr const char* kScaleCode = R"(
extern "C" __global__ void scale(float* out, const float* in, float factor, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] * factor * SCALE_BIAS;
}
)";

constexpr const char* kTemplateCode = R"(
#include "ops.h"
template <typename T, int N>
__global__ void fill(T* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) out[i] = op<T>(static_cast<T>(i));
}
)";

Source scale_cuda(const std::string& bias = "1.0f") {
    return Source::cuda(kScaleCode, {"-DSCALE_BIAS=" + bias});
}

Source fill_cuda(const std::string& op_body = "return x + x;") {
    Source source =
        Source::cuda(kTemplateCode, {"-std=c++17"}, {"fill<float, 64>", "fill<int, 8>"});
    source.headers = {{"ops.h", "template <typename T> __device__ T op(T x) { " + op_body + " }"}};
    return source;
}

std::size_t entry_files(const std::string& dir) {
    std::size_t count = 0;
    if (!fs::exists(dir)) return 0;
    for (const auto& item : fs::recursive_directory_iterator(dir)) {
        if (item.path().extension() == ".kc") ++count;
    }
    return count;
}

// Six threads asking for the same CUDA C++ source under six keys at once; how many failed.
int scale_from_six_threads(KernelCache& cache) {
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 6; ++t) {
        threads.emplace_back([&, t] {
            auto kernel = cache.kernel(
                "scale:" + std::to_string(t), [] { return scale_cuda(); }, "scale");
            if (!kernel.ok()) ++failures;
        });
    }
    for (auto& thread : threads) thread.join();
    return failures.load();
}

class CudaSourceTest : public ::testing::Test {
protected:
    void SetUp() override {
        // The identity, not the library: loading NVRTC here would spoil AWarmStartLoadsNoCompiler.
        if (!driver::nvrtc_identity().ok()) {
            GTEST_SKIP() << driver::nvrtc_identity().error().describe();
        }
    }

    CacheOptions options() const {
        CacheOptions o;
        o.driver = fake_;
        o.disk_directory = dir_;
        return o;
    }

    std::shared_ptr<fakes::FakeDriver> fake_ = std::make_shared<fakes::FakeDriver>();
    test::TempDir temp_;
    std::string dir_ = temp_.path() + "/cache";
};

TEST_F(CudaSourceTest, AnExternCKernelCompilesWithNvrtcAndLoads) {
    KernelCache cache(options());
    auto kernel = cache.kernel(
        "scale", [] { return scale_cuda(); }, "scale");
    ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
    cache.wait_for_uploads();  // a lookup's compile is written to disk behind it
    EXPECT_EQ(cache.stats().compiles, 1u);
    EXPECT_EQ(cache.stats().disk_writes, 1u);
    EXPECT_EQ(fake_->loads(), 1);
}

TEST_F(CudaSourceTest, ATemplateIsFoundByItsNameExpression) {
    KernelCache cache(options());
    auto floats = cache.kernel(
        "fill", [] { return fill_cuda(); }, "fill<float, 64>");
    ASSERT_TRUE(floats.ok()) << floats.error().describe();
    auto ints = cache.kernel(
        "fill", [] { return fill_cuda(); }, "fill<int, 8>");
    ASSERT_TRUE(ints.ok()) << ints.error().describe();
    EXPECT_EQ(cache.stats().compiles, 1u);
}

TEST_F(CudaSourceTest, AnUnlistedTemplateIsNotFoundAndTheErrorSaysWhy) {
    KernelCache cache(options());
    auto kernel = cache.kernel(
        "fill", [] { return fill_cuda(); }, "fill<double, 4>");
    ASSERT_FALSE(kernel.ok());
    EXPECT_EQ(kernel.error().code(), Errc::kKernelNotFound);
    EXPECT_NE(kernel.error().message().find("name_expressions"), std::string::npos)
        << kernel.error().message();
}

TEST_F(CudaSourceTest, ANewProcessFindsTemplatesFromTheDiskWithoutNvrtc) {
    {
        KernelCache first(options());
        ASSERT_TRUE(first
                        .kernel(
                            "fill", [] { return fill_cuda(); }, "fill<float, 64>")
                        .ok());
    }
    KernelCache second(options());
    auto kernel = second.kernel(
        "fill", [] { return fill_cuda(); }, "fill<int, 8>");
    ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
    EXPECT_EQ(second.stats().compiles, 0u);
    EXPECT_EQ(second.stats().disk_hits, 1u);
}

TEST_F(CudaSourceTest, AnotherSpellingOfTheSameOptionsSharesTheArtifact) {
    KernelCache cache(options());
    ASSERT_TRUE(cache
                    .kernel(
                        "a", [] { return scale_cuda(); }, "scale")
                    .ok());
    auto respelled = [] {
        Source source = Source::cuda(kScaleCode, {"--define-macro", "SCALE_BIAS=1.0f"});
        return source;
    };
    ASSERT_TRUE(cache.kernel("b", respelled, "scale").ok());
    cache.wait_for_uploads();  // a lookup's compile is written to disk behind it
    EXPECT_EQ(cache.stats().compiles, 1u);
    EXPECT_EQ(entry_files(dir_), 1u);
}

TEST_F(CudaSourceTest, ChangedOptionsCompileAgain) {
    KernelCache cache(options());
    ASSERT_TRUE(cache
                    .kernel(
                        "a", [] { return scale_cuda("1.0f"); }, "scale")
                    .ok());
    ASSERT_TRUE(cache
                    .kernel(
                        "b", [] { return scale_cuda("2.0f"); }, "scale")
                    .ok());
    cache.wait_for_uploads();  // a lookup's compile is written to disk behind it
    EXPECT_EQ(cache.stats().compiles, 2u);
    EXPECT_EQ(entry_files(dir_), 2u);
}

TEST_F(CudaSourceTest, AChangedHeaderCompilesAgainAndHeaderOrderDoesNot) {
    KernelCache cache(options());
    ASSERT_TRUE(cache
                    .kernel(
                        "a", [] { return fill_cuda(); }, "fill<int, 8>")
                    .ok());
    ASSERT_TRUE(cache
                    .kernel(
                        "b", [] { return fill_cuda("return x * x;"); }, "fill<int, 8>")
                    .ok());
    EXPECT_EQ(cache.stats().compiles, 2u);
    auto reordered = [] {
        Source source = fill_cuda();
        source.headers.insert(source.headers.begin(), {"unused.h", "// nothing"});
        Source same_but_reversed = source;
        std::reverse(same_but_reversed.headers.begin(), same_but_reversed.headers.end());
        return same_but_reversed;
    };
    auto with_unused = [] {
        Source source = fill_cuda();
        source.headers.insert(source.headers.begin(), {"unused.h", "// nothing"});
        return source;
    };
    ASSERT_TRUE(cache.kernel("c", with_unused, "fill<int, 8>").ok());
    ASSERT_TRUE(cache.kernel("d", reordered, "fill<int, 8>").ok());
    EXPECT_EQ(cache.stats().compiles, 3u);  // an added header is new input; its order is not
}

TEST_F(CudaSourceTest, WorkerProcessesCompileForTheCache) {
    CacheOptions o = options();
    o.compile_workers = 2;
    o.compile_worker_command = test::tool_path();
    {
        KernelCache cache(o);
        auto floats = cache.kernel(
            "fill", [] { return fill_cuda(); }, "fill<float, 64>");
        ASSERT_TRUE(floats.ok()) << floats.error().describe();
        auto scale = cache.kernel(
            "scale", [] { return scale_cuda(); }, "scale");
        ASSERT_TRUE(scale.ok()) << scale.error().describe();
        EXPECT_EQ(cache.stats().compiles, 2u);
        auto broken = cache.kernel(
            "broken", [] { return Source::cuda("extern \"C\" __global__ void k() { nope(); }"); },
            "k");
        ASSERT_FALSE(broken.ok());
        EXPECT_EQ(broken.error().code(), Errc::kCompileFailed);
        EXPECT_NE(broken.error().log().find("nope"), std::string::npos) << broken.error().log();
    }
    // What the workers stored is what an in-process cache finds: same fingerprints.
    KernelCache again(options());
    ASSERT_TRUE(again
                    .kernel(
                        "fill", [] { return fill_cuda(); }, "fill<int, 8>")
                    .ok());
    EXPECT_EQ(again.stats().compiles, 0u);
}

TEST_F(CudaSourceTest, AnUnusableWorkerCommandLeavesCompilesInThisProcess) {
    CacheOptions o = options();
    o.compile_workers = 2;
    o.compile_worker_command = temp_.path() + "/no-such-kcache";
    KernelCache cache(o);
    auto kernel = cache.kernel(
        "scale", [] { return scale_cuda(); }, "scale");
    ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
    EXPECT_EQ(cache.stats().compiles, 1u);
}

TEST_F(CudaSourceTest, AWorkerCommandThatIsNoWorkerLeavesCompilesInThisProcess) {
    CacheOptions o = options();
    o.compile_workers = 2;
    o.compile_worker_command = "/bin/true";
    KernelCache cache(o);
    auto kernel = cache.kernel(
        "scale", [] { return scale_cuda(); }, "scale");
    ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
    EXPECT_EQ(cache.stats().compiles, 1u);
}

TEST_F(CudaSourceTest, AHeaderInTheWorkingDirectoryIsNeverPickedUp) {
    // Were it used, its changes would reach the cubin without changing the fingerprint.
    const fs::path previous = fs::current_path();
    fs::current_path(temp_.path());
    std::ofstream("stray.h") << "#define STRAY 1\n";
    KernelCache cache(options());
    auto kernel = cache.kernel(
        "stray",
        [] { return Source::cuda("#include \"stray.h\"\nextern \"C\" __global__ void k() {}"); },
        "k");
    fs::current_path(previous);
    // NVRTC may read it (a quoted include is looked up there), but the header trace refuses it.
    ASSERT_FALSE(kernel.ok());
    EXPECT_EQ(kernel.error().code(), Errc::kInvalidArgument) << kernel.error().describe();
    EXPECT_NE(kernel.error().message().find("stray.h"), std::string::npos)
        << kernel.error().message();
    EXPECT_EQ(entry_files(dir_), 0u);
}

// A header read from disk by an absolute #include, which needs no -I at all.
Source including_from_disk(const std::string& header) {
    return Source::cuda("#include \"" + header +
                        "\"\nextern \"C\" __global__ void k(int* p) { *p = FROM_DISK; }\n");
}

TEST_F(CudaSourceTest, AHeaderReadFromDiskIsRefusedAndNothingIsStored) {
    const std::string header = temp_.path() + "/on_disk.h";
    std::ofstream(header) << "#define FROM_DISK 7\n";
    KernelCache cache(options());
    auto kernel = cache.kernel(
        "from_disk", [&] { return including_from_disk(header); }, "k");
    ASSERT_FALSE(kernel.ok());
    EXPECT_EQ(kernel.error().code(), Errc::kInvalidArgument);
    EXPECT_NE(kernel.error().message().find(header), std::string::npos)
        << kernel.error().describe();
    EXPECT_EQ(entry_files(dir_), 0u);
}

TEST_F(CudaSourceTest, AnEntryCompiledWithDiskHeadersIsNeverServedToASourceWithoutTheOptIn) {
    const std::string header = temp_.path() + "/on_disk.h";
    std::ofstream(header) << "#define FROM_DISK 7\n";
    {
        KernelCache cache(options());
        auto kernel = cache.kernel(
            "from_disk",
            [&] {
                Source source = including_from_disk(header);
                source.allow_disk_headers = true;
                return source;
            },
            "k");
        ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
        cache.wait_for_uploads();  // a lookup's compile is written to disk behind it
        EXPECT_EQ(entry_files(dir_), 1u);
    }
    KernelCache cache(options());
    auto kernel = cache.kernel(
        "from_disk", [&] { return including_from_disk(header); }, "k");
    ASSERT_FALSE(kernel.ok());
    EXPECT_EQ(kernel.error().code(), Errc::kInvalidArgument);
    EXPECT_EQ(cache.stats().disk_hits, 0u);
}

TEST_F(CudaSourceTest, ANameExpressionSpanningLinesIsRefused) {
    KernelCache cache(options());
    auto kernel = cache.kernel(
        "fill",
        [] {
            Source source = fill_cuda();
            source.name_expressions.push_back("fill<float,\n 2>");
            return source;
        },
        "fill<int, 8>");
    ASSERT_FALSE(kernel.ok());
    EXPECT_EQ(kernel.error().code(), Errc::kInvalidArgument);
    EXPECT_EQ(entry_files(dir_), 0u);
}

TEST_F(CudaSourceTest, AHeaderGivenTwiceIsRefused) {
    KernelCache cache(options());
    auto kernel = cache.kernel(
        "fill",
        [] {
            Source source = fill_cuda();
            source.headers.push_back({"ops.h", "// another"});
            return source;
        },
        "fill<int, 8>");
    ASSERT_FALSE(kernel.ok());
    EXPECT_EQ(kernel.error().code(), Errc::kInvalidArgument);
    EXPECT_NE(kernel.error().message().find("ops.h"), std::string::npos);
}

TEST_F(CudaSourceTest, PtxNameExpressionsDoNotDefeatTheDiskTier) {
    if (!driver::nvjitlink_identity().ok()) GTEST_SKIP() << "no nvJitLink";
    auto gelu = [] {
        Source source = Source::ptx(examples::gelu_ptx());
        source.name_expressions = {"gelu"};  // meaningless for PTX: ignored
        return source;
    };
    {
        KernelCache first(options());
        ASSERT_TRUE(first.kernel("gelu", gelu, "gelu").ok());
    }
    KernelCache second(options());
    ASSERT_TRUE(second.kernel("gelu", gelu, "gelu").ok());
    EXPECT_EQ(second.stats().compiles, 0u);
    EXPECT_EQ(second.stats().disk_hits, 1u);
}

// nvJitLink that is there but cannot be used (another CUDA major's, or not a library at all):
// PTX still loads, through the driver's JIT. A fresh process, since the library is found once.
TEST_F(CudaSourceTest, AnUnusableNvJitLinkLeavesPtxToTheDriversJit) {
    if (std::getenv("KCACHE_TEST_BAD_NVJITLINK") != nullptr) {
        KernelCache cache(options());
        auto kernel = cache.kernel(
            "gelu", [] { return Source::ptx(examples::gelu_ptx()); }, "gelu");
        ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
        EXPECT_EQ(cache.stats().disk_writes, 0u);  // the driver's JIT keeps nothing
        EXPECT_EQ(fake_->loads(), 1);
        return;
    }
    const std::string bogus = temp_.path() + "/libnvJitLink.so.13";
    std::ofstream(bogus) << "not a library";
    EXPECT_EQ(test::run_self("CudaSourceTest.AnUnusableNvJitLinkLeavesPtxToTheDriversJit",
                             {"KCACHE_TEST_BAD_NVJITLINK=1", "KCACHE_NVJITLINK_LIBRARY=" + bogus}),
              0);
}

// The pre-warm of issue 4: `kcache compile` on a machine without a GPU, then a program building
// the same source finds it on disk and compiles nothing.
TEST_F(CudaSourceTest, APrewarmByTheKcacheCommandServesAProgramsLookup) {
    const std::string file = temp_.path() + "/scale.cu";
    std::ofstream(file) << kScaleCode;
    std::string tool = test::tool_path();
    std::vector<std::string> args = {tool,     "-d",    dir_, "compile",        file,
                                     "--arch", "sm_90", "-D", "SCALE_BIAS=2.0f"};
    std::vector<char*> argv;
    for (auto& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    pid_t child = 0;
    ASSERT_EQ(posix_spawn(&child, tool.c_str(), nullptr, nullptr, argv.data(), environ), 0);
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);

    KernelCache cache(options());  // the program: its own key, the same code and options
    auto kernel = cache.kernel(
        "my-scale", [] { return Source::cuda(kScaleCode, {"-DSCALE_BIAS=2.0f"}); }, "scale");
    ASSERT_TRUE(kernel.ok()) << kernel.error().describe();
    EXPECT_EQ(cache.stats().compiles, 0u);
    EXPECT_EQ(cache.stats().disk_hits, 1u);
}

TEST_F(CudaSourceTest, AMissSaysWhichPartDifferedFromTheNearestEntry) {
    {
        KernelCache first(options());
        ASSERT_TRUE(first
                        .kernel(
                            "scale", [] { return scale_cuda("1.0f"); }, "scale")
                        .ok());
    }
    test::LogToFile log(temp_.path() + "/log.txt");
    KernelCache second(options());
    ASSERT_TRUE(second
                    .kernel(
                        "scale", [] { return scale_cuda("2.0f"); }, "scale")
                    .ok());
    const std::string text = log.text();
    EXPECT_NE(text.find("options differ"), std::string::npos) << text;
    EXPECT_NE(text.find("-DSCALE_BIAS=1.0f"), std::string::npos) << text;
    EXPECT_EQ(text.find("source differs"), std::string::npos) << text;
}

TEST_F(CudaSourceTest, AMissAfterNewNameExpressionsSaysSo) {
    {
        KernelCache first(options());
        ASSERT_TRUE(first
                        .kernel(
                            "fill", [] { return fill_cuda(); }, "fill<int, 8>")
                        .ok());
    }
    test::LogToFile log(temp_.path() + "/log.txt");
    KernelCache second(options());
    auto more = [] {
        Source source = fill_cuda();
        source.name_expressions.push_back("fill<double, 2>");
        return source;
    };
    ASSERT_TRUE(second.kernel("fill", more, "fill<double, 2>").ok());
    EXPECT_EQ(second.stats().compiles, 1u);
    const std::string text = log.text();
    EXPECT_NE(text.find("name expressions differ"), std::string::npos) << text;
}

TEST_F(CudaSourceTest, AnArchOptionIsRefusedAndNothingIsCached) {
    KernelCache cache(options());
    auto kernel = cache.kernel(
        "scale",
        [] {
            return Source::cuda(kScaleCode, {"-arch=sm_80", "-DSCALE_BIAS=1"});
        },
        "scale");
    ASSERT_FALSE(kernel.ok());
    EXPECT_EQ(kernel.error().code(), Errc::kInvalidArgument);
    EXPECT_NE(kernel.error().message().find("-arch=sm_80"), std::string::npos);
    EXPECT_EQ(cache.size(), 0u);
    EXPECT_EQ(entry_files(dir_), 0u);
}

TEST_F(CudaSourceTest, ACompileErrorReturnsNvrtcsLogAndStoresNothing) {
    KernelCache cache(options());
    auto kernel = cache.kernel(
        "broken", [] { return Source::cuda("extern \"C\" __global__ void k() { undeclared(); }"); },
        "k");
    ASSERT_FALSE(kernel.ok());
    EXPECT_EQ(kernel.error().code(), Errc::kCompileFailed);
    EXPECT_NE(kernel.error().log().find("undeclared"), std::string::npos) << kernel.error().log();
    EXPECT_EQ(cache.size(), 0u);
    EXPECT_EQ(entry_files(dir_), 0u);
    EXPECT_EQ(cache.stats().compile_failures, 1u);
}

TEST_F(CudaSourceTest, PrebuildFillsTheDiskForAnArchWithoutAGpu) {
    KernelCache cache(options());
    auto origin = cache.prebuild(
        "scale", [] { return scale_cuda(); }, 80);
    ASSERT_TRUE(origin.ok()) << origin.error().describe();
    EXPECT_EQ(*origin, Provenance::kCompiled);
    EXPECT_EQ(fake_->loads(), 0);
    auto again = cache.prebuild(
        "scale", [] { return scale_cuda(); }, 80);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(*again, Provenance::kMemoryTier);
}

TEST_F(CudaSourceTest, ThreadsMissingOneSourceUnderManyKeysCompileItOnce) {
    CacheOptions o = options();
    o.disk_directory.clear();  // the in-process single flight alone, no disk lock to lean on
    KernelCache cache(o);
    EXPECT_EQ(scale_from_six_threads(cache), 0);
    EXPECT_EQ(cache.stats().compiles, 1u);
    EXPECT_EQ(cache.stats().memory_hits, 5u);
}

TEST_F(CudaSourceTest, WaitersGetTheLeadersCubinWhenNoTierKeepsIt) {
    CacheOptions o = options();
    o.disk_directory.clear();
    o.memory_bytes = 0;  // nothing is kept: waiters must not compile again
    KernelCache cache(o);
    EXPECT_EQ(scale_from_six_threads(cache), 0);
    EXPECT_LE(cache.stats().compiles, 2u);  // a thread arriving after the flight landed compiles
}

TEST_F(CudaSourceTest, VerificationCatchesAKeyReusedWithOtherOptions) {
    CacheOptions o = options();
    o.verify = true;
    KernelCache cache(o);
    ASSERT_TRUE(cache
                    .kernel(
                        "scale", [] { return scale_cuda("1.0f"); }, "scale")
                    .ok());
    auto reused = cache.kernel(
        "scale", [] { return scale_cuda("3.0f"); }, "scale");
    ASSERT_FALSE(reused.ok());
    EXPECT_EQ(reused.error().code(), Errc::kKeyConflict);
}

// A warm start must not load a compiler: loading NVRTC or nvJitLink costs 5-60 ms, more than the
// whole warm start. Checked in a fresh process (this one has loaded them already): the child run
// of this test fills nothing, it only reads the disk and checks what got loaded.
TEST_F(CudaSourceTest, AWarmStartLoadsNoCompiler) {
    if (const char* child_dir = std::getenv("KCACHE_TEST_WARM_CHILD_DIR")) {
        CacheOptions o = options();
        o.disk_directory = child_dir;
        KernelCache cache(o);
        auto cuda = cache.kernel(
            "fill", [] { return fill_cuda(); }, "fill<int, 8>");
        ASSERT_TRUE(cuda.ok()) << cuda.error().describe();
        auto ptx = cache.kernel(
            "gelu", [] { return Source::ptx(examples::gelu_ptx()); }, "gelu");
        ASSERT_TRUE(ptx.ok()) << ptx.error().describe();
        ASSERT_EQ(cache.stats().compiles, 0u);
        EXPECT_EQ(dlopen("libnvrtc.so.13", RTLD_NOW | RTLD_NOLOAD), nullptr);
        EXPECT_EQ(dlopen("libnvJitLink.so.13", RTLD_NOW | RTLD_NOLOAD), nullptr);
        return;
    }
    if (!driver::nvjitlink_api().ok()) GTEST_SKIP() << "no nvJitLink";
    {
        KernelCache cache(options());
        ASSERT_TRUE(cache
                        .kernel(
                            "fill", [] { return fill_cuda(); }, "fill<int, 8>")
                        .ok());
        ASSERT_TRUE(cache
                        .kernel(
                            "gelu", [] { return Source::ptx(examples::gelu_ptx()); }, "gelu")
                        .ok());
    }
    EXPECT_EQ(test::run_self("CudaSourceTest.AWarmStartLoadsNoCompiler",
                             {"KCACHE_TEST_WARM_CHILD_DIR=" + dir_}),
              0)
        << "the warm child process failed; run it by hand to see";
}

}  // namespace
}  // namespace kcache
