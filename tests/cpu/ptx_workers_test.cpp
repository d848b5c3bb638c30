// SPDX-License-Identifier: Apache-2.0
// PTX linked in compile worker processes: nvJitLink's compiles slow each other down inside one
// process, so a PTX link goes to a compile worker that is started and idle (CUDA C++ compiles
// start them; PTX never does). The worker's cubin is the one this process would make, its errors
// keep nvJitLink's log, and a worker that would link with another nvJitLink is refused.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "compile/compiler.hpp"
#include "compile/worker_pool.hpp"
#include "compile/worker_protocol.hpp"
#include "driver/compiler_libraries.hpp"
#include "examples/ptx_kernels.hpp"
#include "kcache/kcache.hpp"
#include "test_support.hpp"
#include "testing/fake_driver.hpp"
#include "worker_support.hpp"

namespace kcache {
namespace {

using compile::Target;
using compile::WorkerPool;

bool is_executable_elf(const std::string& bytes) {
    return bytes.size() > 17 &&
           bytes.compare(0, 4,
                         "\x7f"
                         "ELF") == 0 &&
           bytes[16] == 2;
}

const char* const kTinyCuda = "extern \"C\" __global__ void tiny(float* p) { p[0] = 1.0f; }\n";

// Identities only (file reads) decide whether to run; the workers load the compilers themselves.
class PtxWorkersTest : public ::testing::Test {
protected:
    void SetUp() override {
        if (!driver::nvjitlink_identity().ok()) {
            GTEST_SKIP() << driver::nvjitlink_identity().error().describe();
        }
        if (!driver::nvrtc_identity().ok()) {
            GTEST_SKIP() << "workers start on CUDA C++: "
                         << driver::nvrtc_identity().error().describe();
        }
    }

    std::unique_ptr<WorkerPool> start_pool(const std::string& command,
                                           std::vector<std::string> args) {
        auto pool = WorkerPool::start(command, std::move(args), 1);
        EXPECT_TRUE(pool.ok()) << pool.error().describe();
        return pool.ok() ? std::move(pool).value() : nullptr;
    }
    // A pool whose one worker was started by a CUDA C++ compile and is idle now.
    std::unique_ptr<WorkerPool> started_pool() {
        auto pool = start_pool(test::tool_path(), {"compile-worker"});
        if (!pool) return nullptr;
        compile::CudaProgram program;
        program.code = kTinyCuda;
        auto compiled = pool->compile_cuda(program, Target{90, false});
        EXPECT_TRUE(compiled.ok()) << compiled.error().describe();
        EXPECT_EQ(pool->worker_pids().size(), 1u);
        return pool;
    }

    // A script that notes each start in `starts`, copies what the pool sends into `requests`
    // and runs the real worker on it.
    std::string recording_worker() {
        const std::string path = temp_.path() + "/recording-worker";
        std::ofstream(path) << "#!/bin/sh\necho started >> '" << temp_.path()
                            << "/starts'\ntee -a '" << requests_path() << "' | '"
                            << test::tool_path() << "' \"$@\"\n";
        ::chmod(path.c_str(), 0700);
        return path;
    }
    std::string requests_path() const { return temp_.path() + "/requests"; }
    std::string requests() const { return test::read_file(requests_path()); }
    int starts() const { return test::count_lines(temp_.path() + "/starts"); }

    test::TempDir temp_;
};

TEST_F(PtxWorkersTest, APtxLinkNeverStartsAWorker) {
    auto pool = start_pool(test::tool_path(), {"compile-worker"});
    ASSERT_TRUE(pool);
    EXPECT_FALSE(pool->link_ptx_if_idle(examples::residual_add_ptx(), Target{90, false}));
    EXPECT_TRUE(pool->worker_pids().empty());
}

TEST_F(PtxWorkersTest, AnIdleWorkerLinksPtxToTheCubinThisProcessWouldMake) {
    auto pool = started_pool();
    ASSERT_TRUE(pool);
    const std::string ptx = examples::residual_add_ptx();
    auto linked = pool->link_ptx_if_idle(ptx, Target{90, false});
    ASSERT_TRUE(linked) << "the started worker was not used";
    ASSERT_TRUE(linked->ok()) << linked->error().describe();
    EXPECT_TRUE(is_executable_elf(linked->value().cubin));
    EXPECT_NE(linked->value().cubin.find("residual_add"), std::string::npos);
    auto here = compile::link_ptx(ptx, Target{90, false});
    ASSERT_TRUE(here.ok()) << here.error().describe();
    EXPECT_TRUE(linked->value().cubin == here->cubin)
        << "the worker's cubin differs from this process's";
}

TEST_F(PtxWorkersTest, BadPtxComesBackWithNvJitLinksLogAndKeepsTheWorker) {
    auto pool = started_pool();
    ASSERT_TRUE(pool);
    const auto pids = pool->worker_pids();
    const std::string bad =
        ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k() {\n"
        "  add.f32 %f1, %f2, %nope;\n  ret;\n}\n";
    auto failed = pool->link_ptx_if_idle(bad, Target{90, false});
    ASSERT_TRUE(failed);
    ASSERT_FALSE(failed->ok());
    EXPECT_EQ(failed->error().code(), Errc::kCompileFailed) << failed->error().describe();
    EXPECT_NE(failed->error().log().find("nope"), std::string::npos) << failed->error().log();
    auto next = pool->link_ptx_if_idle(examples::scale_ptx(), Target{90, false});
    ASSERT_TRUE(next && next->ok());
    EXPECT_EQ(pool->worker_pids(), pids) << "a PTX error cost the worker";
}

TEST_F(PtxWorkersTest, AWorkerThatWouldLinkWithAnotherNvJitLinkIsRefused) {
    // A worker that says hello like a real one, but names another nvJitLink.
    const auto& cuda = compile::cuda_compiler_identity();
    const std::string hello = compile::encode_hello(
        compile::WorkerHello{cuda ? *cuda : std::string(), "nvJitLink build-id 0000000000000000"});
    const std::string frame_path = temp_.path() + "/hello";
    ASSERT_TRUE(test::write_frame_file(frame_path, hello));
    auto pool = start_pool("/bin/sh", {"-c", "cat '" + frame_path + "'; head -c 1 >/dev/null"});
    ASSERT_TRUE(pool);
    compile::CudaProgram program;
    program.code = kTinyCuda;
    auto compiled = pool->compile_cuda(program, Target{90, false});
    ASSERT_FALSE(compiled.ok());
    EXPECT_EQ(compiled.error().code(), Errc::kIoError);
    EXPECT_NE(compiled.error().message().find("links PTX with 'nvJitLink build-id 0000"),
              std::string::npos)
        << compiled.error().message();
}

TEST_F(PtxWorkersTest, AnIdleWorkerThatDiesOnAPtxLinkIsRetiredAndNoneStartsInItsPlace) {
    // A fake worker: a real hello, one successful CUDA C++ answer (so it is idle after it), then
    // it dies on the next request.
    const auto& cuda = compile::cuda_compiler_identity();
    const auto& ptx = compile::ptx_compiler_identity();
    compile::Compiled compiled;
    compiled.cubin =
        "\x7f"
        "ELF";
    const std::string hello_path = temp_.path() + "/hello";
    const std::string answer_path = temp_.path() + "/answer";
    ASSERT_TRUE(test::write_frame_file(
        hello_path, compile::encode_hello(compile::WorkerHello{cuda ? *cuda : std::string(),
                                                               ptx ? *ptx : std::string()})));
    ASSERT_TRUE(test::write_frame_file(
        answer_path, compile::encode_response(compile::CompileResponse(compiled))));
    const std::string starts = temp_.path() + "/starts";
    auto pool = start_pool("/bin/sh", {"-c", "echo started >> '" + starts + "'; cat '" +
                                                 hello_path + "'; head -c 1 >/dev/null; cat '" +
                                                 answer_path + "'; head -c 1 >/dev/null; exit 3"});
    ASSERT_TRUE(pool);
    compile::CudaProgram program;
    program.code = kTinyCuda;
    ASSERT_TRUE(pool->compile_cuda(program, Target{90, false}).ok());
    ASSERT_EQ(pool->worker_pids().size(), 1u);

    EXPECT_FALSE(pool->link_ptx_if_idle(examples::residual_add_ptx(), Target{90, false}))
        << "a dead worker's failure was returned instead of leaving the link to this process";
    EXPECT_TRUE(pool->worker_pids().empty()) << "the dead worker was not retired";
    EXPECT_EQ(test::count_lines(starts), 1)
        << "a PTX link started a worker in the dead one's place";
    // Its slot is free again: the next CUDA C++ compile starts a worker in it.
    EXPECT_TRUE(pool->compile_cuda(program, Target{90, false}).ok());
    EXPECT_EQ(test::count_lines(starts), 2);
}

TEST_F(PtxWorkersTest, ACacheLinksPtxOnAWorkerThatCudaCompilesStartedAndStoresWhatItWouldFind) {
    const std::string directory = temp_.path() + "/cache";
    auto options = [&] {
        CacheOptions o;
        o.driver = std::make_shared<fakes::FakeDriver>();
        o.disk_directory = directory;
        return o;
    };
    {
        CacheOptions o = options();
        o.compile_workers = 1;
        o.compile_worker_command = recording_worker();
        KernelCache cache(o);
        auto residual = cache.kernel("residual", test::residual_add_source, "residual_add");
        ASSERT_TRUE(residual.ok()) << residual.error().describe();
        EXPECT_EQ(starts(), 0) << "a PTX link started a worker";
        auto tiny = cache.kernel(
            "tiny", [] { return Source::cuda(kTinyCuda); }, "tiny");
        ASSERT_TRUE(tiny.ok()) << tiny.error().describe();
        EXPECT_EQ(starts(), 1);
        auto softmax = cache.kernel(
            test::softmax_key(32), [] { return test::softmax_source(32); }, test::kSoftmax);
        ASSERT_TRUE(softmax.ok()) << softmax.error().describe();
        EXPECT_EQ(cache.stats().compiles, 3u);
    }
    const std::string sent = requests();
    EXPECT_EQ(sent.find(".entry residual_add"), std::string::npos) << "linked before a worker ran";
    EXPECT_NE(sent.find(".entry softmax_rows"), std::string::npos)
        << "the idle worker did not link the PTX";
    // What the worker linked is what a cache without workers finds: the same fingerprints.
    KernelCache again(options());
    ASSERT_TRUE(
        again
            .kernel(
                test::softmax_key(32), [] { return test::softmax_source(32); }, test::kSoftmax)
            .ok());
    EXPECT_EQ(again.stats().compiles, 0u);
    EXPECT_EQ(again.stats().disk_hits, 1u);
}

}  // namespace
}  // namespace kcache
