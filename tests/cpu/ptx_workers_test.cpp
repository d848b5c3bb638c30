// SPDX-License-Identifier: Apache-2.0
// PTX linked in compile worker processes: nvJitLink's compiles slow each other down inside one
// process, so a warm-up with compile_workers links PTX in `kcache compile-worker` processes. The
// worker's cubin is the one this process would make, its errors keep nvJitLink's log, and a worker
// that would link with another nvJitLink is refused.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

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

// Identities only (file reads) decide whether to run; the workers load nvJitLink themselves.
class PtxWorkersTest : public ::testing::Test {
protected:
    void SetUp() override {
        if (!driver::nvjitlink_identity().ok()) {
            GTEST_SKIP() << driver::nvjitlink_identity().error().describe();
        }
    }

    std::unique_ptr<WorkerPool> start_pool(const std::string& command,
                                           std::vector<std::string> args) {
        auto pool = WorkerPool::start(command, std::move(args), 2);
        EXPECT_TRUE(pool.ok()) << pool.error().describe();
        return pool.ok() ? std::move(pool).value() : nullptr;
    }

    // A script that notes each start in `starts` and then runs the real worker.
    std::string counting_worker() {
        const std::string path = temp_.path() + "/counting-worker";
        std::ofstream(path) << "#!/bin/sh\necho started >> '" << starts_path() << "'\nexec '"
                            << test::tool_path() << "' \"$@\"\n";
        ::chmod(path.c_str(), 0700);
        return path;
    }
    std::string starts_path() const { return temp_.path() + "/starts"; }
    int starts() const {
        std::ifstream in(starts_path());
        int lines = 0;
        for (std::string line; std::getline(in, line);) ++lines;
        return lines;
    }

    test::TempDir temp_;
};

TEST_F(PtxWorkersTest, AWorkerLinksPtxToTheCubinThisProcessWouldMake) {
    auto pool = start_pool(test::tool_path(), {"compile-worker"});
    ASSERT_TRUE(pool);
    const std::string ptx = examples::residual_add_ptx();
    auto linked = pool->link_ptx(ptx, Target{90, false});
    ASSERT_TRUE(linked.ok()) << linked.error().describe();
    EXPECT_TRUE(is_executable_elf(linked->cubin));
    EXPECT_NE(linked->cubin.find("residual_add"), std::string::npos);
    ASSERT_EQ(pool->worker_pids().size(), 1u);
    EXPECT_NE(pool->worker_pids()[0], ::getpid());
    auto here = compile::link_ptx(ptx, Target{90, false});
    ASSERT_TRUE(here.ok()) << here.error().describe();
    EXPECT_TRUE(linked->cubin == here->cubin) << "the worker's cubin differs from this process's";
}

TEST_F(PtxWorkersTest, BadPtxComesBackWithNvJitLinksLogAndKeepsTheWorker) {
    auto pool = start_pool(test::tool_path(), {"compile-worker"});
    ASSERT_TRUE(pool);
    const std::string bad =
        ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k() {\n"
        "  add.f32 %f1, %f2, %nope;\n  ret;\n}\n";
    auto failed = pool->link_ptx(bad, Target{90, false});
    ASSERT_FALSE(failed.ok());
    EXPECT_EQ(failed.error().code(), Errc::kCompileFailed) << failed.error().describe();
    EXPECT_NE(failed.error().log().find("nope"), std::string::npos) << failed.error().log();
    const auto pids = pool->worker_pids();
    ASSERT_TRUE(pool->link_ptx(examples::scale_ptx(), Target{90, false}).ok());
    EXPECT_EQ(pool->worker_pids(), pids) << "a PTX error cost the worker";
}

TEST_F(PtxWorkersTest, AWorkerThatWouldLinkWithAnotherNvJitLinkIsRefused) {
    // A worker that says hello like a real one, but names another nvJitLink.
    const auto& cuda = compile::cuda_compiler_identity();
    const std::string hello = compile::encode_hello(
        compile::WorkerHello{cuda ? *cuda : std::string(), "nvJitLink build-id 0000000000000000"});
    const std::string frame_path = temp_.path() + "/hello";
    {
        int fds[2];
        ASSERT_EQ(::pipe(fds), 0);
        ASSERT_TRUE(compile::write_frame(fds[1], hello).ok());
        ::close(fds[1]);
        std::string frame(compile::kFrameHeaderSize + hello.size(), '\0');
        ASSERT_EQ(::read(fds[0], frame.data(), frame.size()), static_cast<ssize_t>(frame.size()));
        ::close(fds[0]);
        std::ofstream(frame_path, std::ios::binary) << frame;
    }
    auto pool = start_pool("/bin/sh", {"-c", "cat '" + frame_path + "'; head -c 1 >/dev/null"});
    ASSERT_TRUE(pool);
    auto linked = pool->link_ptx(examples::residual_add_ptx(), Target{90, false});
    ASSERT_FALSE(linked.ok());
    EXPECT_EQ(linked.error().code(), Errc::kIoError);
    EXPECT_NE(linked.error().message().find("links PTX with 'nvJitLink build-id 0000"),
              std::string::npos)
        << linked.error().message();
}

TEST_F(PtxWorkersTest, AWarmUpWithCompileWorkersLinksItsPtxInThemAndStoresWhatThisProcessFinds) {
    const std::string directory = temp_.path() + "/cache";
    auto options = [&] {
        CacheOptions o;
        o.driver = std::make_shared<fakes::FakeDriver>();
        o.disk_directory = directory;
        return o;
    };
    std::vector<WarmUpItem> items;
    items.push_back({"residual", [] { return test::residual_add_source(); }, "residual_add"});
    items.push_back({"scale", [] { return test::scale_source(); }, "scale_kernel"});
    for (int cols : {32, 64, 128}) {
        items.push_back({test::softmax_key(cols), [cols] { return test::softmax_source(cols); },
                         test::kSoftmax});
    }
    {
        CacheOptions o = options();
        o.compile_workers = 2;
        o.compile_worker_command = counting_worker();
        KernelCache cache(o);
        for (const auto& result : cache.warm_up(items, 4)) {
            ASSERT_TRUE(result.ok()) << result.error().describe();
        }
        EXPECT_EQ(cache.stats().compiles, items.size());
    }
    EXPECT_GE(starts(), 1) << "no compile worker started: the PTX was linked in this process";
    EXPECT_LE(starts(), 2);
    // The workers' cubins are found by a cache without workers: the same fingerprints.
    KernelCache again(options());
    for (const auto& result : again.warm_up(items, 4)) {
        ASSERT_TRUE(result.ok()) << result.error().describe();
    }
    EXPECT_EQ(again.stats().compiles, 0u);
    EXPECT_EQ(again.stats().disk_hits, items.size());
}

}  // namespace
}  // namespace kcache
