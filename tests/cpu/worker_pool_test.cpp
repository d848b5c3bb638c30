// SPDX-License-Identifier: Apache-2.0
// WorkerPool with the real `kcache compile-worker` (KCACHE_TOOL_PATH), and with commands that
// are not workers or die mid-request. NVRTC is only ever loaded in the worker processes.
#include "compile/worker_pool.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "compile/worker_protocol.hpp"
#include "driver/compiler_api.hpp"
#include "test_support.hpp"
#include "worker_support.hpp"

namespace kcache::compile {
namespace {

using namespace std::chrono_literals;

const std::string kTool = test::tool_path();

bool is_elf(const std::string& bytes) {
    return bytes.rfind(
               "\x7f"
               "ELF",
               0) == 0;
}

CudaProgram program_of(std::string code, std::string name = "kernel.cu") {
    CudaProgram program;
    program.name = std::move(name);
    program.code = std::move(code);
    return program;
}

const char* const kScale = R"(
extern "C" __global__ void scale(float* data, float factor, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) data[i] *= factor;
}
template <typename T, int N> __global__ void fill(T* d) { d[N] = T(N); }
)";

std::unique_ptr<WorkerPool> start_pool(std::size_t workers) {
    auto pool = WorkerPool::start(kTool, {"compile-worker"}, workers);
    EXPECT_TRUE(pool.ok()) << pool.error().describe();
    return pool.ok() ? std::move(pool).value() : nullptr;
}

// True when `pid` is no child of ours any more: reaped, not a zombie.
bool reaped(pid_t pid) {
    int status = 0;
    return ::waitpid(pid, &status, WNOHANG) == -1 && errno == ECHILD;
}

// Identity only (a file read): the test process never loads NVRTC itself.
class WorkerPoolTest : public ::testing::Test {
protected:
    void SetUp() override {
        if (!driver::nvrtc_identity().ok()) {
            GTEST_SKIP() << driver::nvrtc_identity().error().describe();
        }
    }
};

TEST_F(WorkerPoolTest, AWorkerInheritsNoneOfTheApplicationsDescriptors) {
    // Opened without O_CLOEXEC, as application code often does, at a number the worker would not
    // open for itself.
    const int opened = ::open("/dev/null", O_RDONLY);  // NOLINT(android-cloexec-open)
    ASSERT_GE(opened, 0);
    const int stray = ::fcntl(opened, F_DUPFD, 200);
    ::close(opened);
    ASSERT_GE(stray, 200);
    auto pool = start_pool(1);
    ASSERT_NE(pool, nullptr);
    ASSERT_TRUE(pool->compile_cuda(program_of(kScale), Target{90}).ok());
    const auto pids = pool->worker_pids();
    ASSERT_EQ(pids.size(), 1u);
    const std::string fd_path = "/proc/" + std::to_string(pids[0]) + "/fd/" + std::to_string(stray);
    EXPECT_NE(::access(fd_path.c_str(), F_OK), 0) << fd_path << " is open in the worker";
    ::close(stray);
}

TEST_F(WorkerPoolTest, CompilesInAWorkerToAnElfCubinWithLoweredNames) {
    auto pool = start_pool(1);
    ASSERT_TRUE(pool);
    EXPECT_TRUE(pool->worker_pids().empty()) << "workers start on first use";
    CudaProgram program = program_of(kScale, "scale.cu");
    program.name_expressions = {"fill<float, 4>"};
    auto compiled = pool->compile_cuda(program, Target{90, false});
    ASSERT_TRUE(compiled.ok()) << compiled.error().describe();
    EXPECT_TRUE(is_elf(compiled->cubin));
    EXPECT_NE(compiled->cubin.find("scale"), std::string::npos);
    const std::string& lowered = compiled->lowered_names.at("fill<float, 4>");
    EXPECT_EQ(lowered.rfind("_Z", 0), 0u) << lowered;
    EXPECT_NE(compiled->cubin.find(lowered), std::string::npos);
    ASSERT_EQ(pool->worker_pids().size(), 1u);
    EXPECT_NE(pool->worker_pids()[0], ::getpid());
}

TEST_F(WorkerPoolTest, AHeaderReadFromDiskIsRefusedInAWorkerAndReportedWithTheOptIn) {
    test::TempDir temp;
    const std::string header = temp.path() + "/on_disk.h";
    std::ofstream(header) << "#define FROM_DISK 7\n";
    auto pool = start_pool(1);
    ASSERT_TRUE(pool);
    CudaProgram program =
        program_of("#include \"" + header +
                   "\"\nextern \"C\" __global__ void k(int* p) { *p = FROM_DISK; }\n");
    auto refused = pool->compile_cuda(program, Target{90, false});
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().code(), Errc::kInvalidArgument);
    EXPECT_NE(refused.error().message().find(header), std::string::npos);
    program.allow_disk_headers = true;
    auto compiled = pool->compile_cuda(program, Target{90, false});
    ASSERT_TRUE(compiled.ok()) << compiled.error().describe();
    EXPECT_EQ(compiled->disk_headers, std::vector<std::string>{header});
}

TEST_F(WorkerPoolTest, CompileErrorComesBackWithTheLogAndKeepsTheWorker) {
    auto pool = start_pool(1);
    ASSERT_TRUE(pool);
    auto broken = pool->compile_cuda(
        program_of("__global__ void k() { undeclared_thing(); }", "broken.cu"), Target{90, false});
    ASSERT_FALSE(broken.ok());
    EXPECT_EQ(broken.error().code(), Errc::kCompileFailed);
    EXPECT_NE(broken.error().log().find("undeclared_thing"), std::string::npos)
        << broken.error().describe();
    EXPECT_NE(broken.error().message().find("broken.cu"), std::string::npos);
    // Not retried, not replaced: the same worker compiles the next program.
    auto pids = pool->worker_pids();
    ASSERT_EQ(pids.size(), 1u);
    ASSERT_TRUE(pool->compile_cuda(program_of(kScale), Target{90, false}).ok());
    EXPECT_EQ(pool->worker_pids(), pids);
}

TEST_F(WorkerPoolTest, FourThreadsShareTwoWorkers) {
    auto pool = start_pool(2);
    ASSERT_TRUE(pool);
    constexpr int kThreads = 4;
    constexpr int kEach = 3;
    std::vector<std::string> failures[kThreads];
    std::vector<std::thread> threads;
    threads.reserve(kThreads);
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            for (int i = 0; i < kEach; ++i) {
                CudaProgram program = program_of(kScale);
                program.options = {"-DVARIANT=" + std::to_string(t * kEach + i)};
                auto compiled = pool->compile_cuda(program, Target{90, false});
                if (!compiled.ok()) {
                    failures[t].push_back(compiled.error().describe());
                } else if (!is_elf(compiled->cubin)) {
                    failures[t].push_back("not an ELF");
                }
            }
        });
    }
    for (auto& thread : threads) thread.join();
    for (const auto& list : failures) EXPECT_TRUE(list.empty()) << list.front();
    EXPECT_GE(pool->worker_pids().size(), 1u);
    EXPECT_LE(pool->worker_pids().size(), 2u);
}

TEST_F(WorkerPoolTest, KilledWorkerIsReplacedAndTheNextCompileSucceeds) {
    auto pool = start_pool(1);
    ASSERT_TRUE(pool);
    ASSERT_TRUE(pool->compile_cuda(program_of(kScale), Target{90, false}).ok());
    ASSERT_EQ(pool->worker_pids().size(), 1u);
    const pid_t victim = pool->worker_pids()[0];
    ASSERT_EQ(::kill(victim, SIGKILL), 0);

    auto compiled = pool->compile_cuda(program_of(kScale), Target{90, false});
    ASSERT_TRUE(compiled.ok()) << compiled.error().describe();
    EXPECT_TRUE(is_elf(compiled->cubin));
    ASSERT_EQ(pool->worker_pids().size(), 1u);
    EXPECT_NE(pool->worker_pids()[0], victim);
    EXPECT_TRUE(reaped(victim)) << "the killed worker was left a zombie";
}

TEST_F(WorkerPoolTest, DestroyingThePoolReapsEveryWorker) {
    auto pool = start_pool(2);
    ASSERT_TRUE(pool);
    std::thread other([&] { (void)pool->compile_cuda(program_of(kScale), Target{90, false}); });
    ASSERT_TRUE(pool->compile_cuda(program_of(kScale), Target{90, true}).ok());
    other.join();
    const std::vector<pid_t> pids = pool->worker_pids();
    ASSERT_FALSE(pids.empty());
    for (pid_t pid : pids) EXPECT_FALSE(reaped(pid)) << "a worker should be alive before";
    pool.reset();
    for (pid_t pid : pids) EXPECT_TRUE(reaped(pid)) << "pid " << pid << " left a zombie";
}

// The commands below are not kcache workers; none of them needs NVRTC.

TEST(WorkerPoolCommand, MissingCommandIsRefusedAtStart) {
    auto pool = WorkerPool::start("/nonexistent/kcache", {"compile-worker"}, 2);
    ASSERT_FALSE(pool.ok());
    EXPECT_EQ(pool.error().code(), Errc::kIoError);
    EXPECT_NE(pool.error().message().find("/nonexistent/kcache"), std::string::npos);
}

TEST(WorkerPoolCommand, ZeroWorkersOrNoCommandIsInvalid) {
    EXPECT_EQ(WorkerPool::start(kTool, {"compile-worker"}, 0).error().code(),
              Errc::kInvalidArgument);
    EXPECT_EQ(WorkerPool::start("", {}, 1).error().code(), Errc::kInvalidArgument);
}

TEST(WorkerPoolCommand, CommandMissingFromPathFailsTheCompileClearly) {
    auto pool = WorkerPool::start("kcache-no-such-worker-command", {}, 1);
    ASSERT_TRUE(pool.ok());
    auto compiled = (*pool)->compile_cuda(program_of(kScale), Target{90, false});
    ASSERT_FALSE(compiled.ok());
    EXPECT_EQ(compiled.error().code(), Errc::kIoError);
    EXPECT_NE(compiled.error().message().find("kcache-no-such-worker-command"), std::string::npos)
        << compiled.error().message();
}

TEST(WorkerPoolCommand, CommandThatExitsAtOnceFailsTheCompileClearly) {
    auto pool = WorkerPool::start("/bin/sh", {"-c", "exit 7"}, 1);
    ASSERT_TRUE(pool.ok()) << pool.error().describe();
    auto compiled = (*pool)->compile_cuda(program_of(kScale), Target{90, false});
    ASSERT_FALSE(compiled.ok());
    EXPECT_EQ(compiled.error().code(), Errc::kIoError);
    EXPECT_NE(compiled.error().message().find("/bin/sh"), std::string::npos);
    EXPECT_NE(compiled.error().message().find("exited with status 7"), std::string::npos)
        << compiled.error().message();
    EXPECT_TRUE((*pool)->worker_pids().empty());
}

TEST(WorkerPoolCommand, CommandThatNeverSpeaksTimesOutInsteadOfHanging) {
    auto pool = WorkerPool::start("/bin/cat", {}, 1, 200ms);
    ASSERT_TRUE(pool.ok()) << pool.error().describe();
    auto start = std::chrono::steady_clock::now();
    auto compiled = (*pool)->compile_cuda(program_of(kScale), Target{90, false});
    ASSERT_FALSE(compiled.ok());
    EXPECT_EQ(compiled.error().code(), Errc::kIoError);
    EXPECT_NE(compiled.error().message().find("/bin/cat"), std::string::npos);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

TEST(WorkerPoolCommand, CommandThatSpeaksGarbageIsNotAWorker) {
    auto pool = WorkerPool::start("/bin/sh", {"-c", "echo this-is-not-a-kcache-worker; cat"}, 1);
    ASSERT_TRUE(pool.ok()) << pool.error().describe();
    auto compiled = (*pool)->compile_cuda(program_of(kScale), Target{90, false});
    ASSERT_FALSE(compiled.ok());
    EXPECT_EQ(compiled.error().code(), Errc::kIoError);
    EXPECT_NE(compiled.error().message().find("no valid hello"), std::string::npos)
        << compiled.error().message();
}

// A fake worker: a correct hello (from a file), then it reads a little of the request and ends
// as `then` says. Shows the retry on a fresh process and the error after the second failure.
class WorkerDying : public ::testing::Test {
protected:
    std::unique_ptr<WorkerPool> pool_ending_with(const std::string& then) {
        const auto& identity = cuda_compiler_identity();
        const auto& ptx = ptx_compiler_identity();
        std::string hello = encode_hello(
            WorkerHello{identity ? *identity : std::string(), ptx ? *ptx : std::string()});
        hello_path_ = dir_.path() + "/hello";
        EXPECT_TRUE(test::write_frame_file(hello_path_, hello));
        const std::string script = "cat '" + hello_path_ + "'; echo started >> '" + dir_.path() +
                                   "/starts'; head -c 1 >/dev/null; " + then;
        auto pool = WorkerPool::start("/bin/sh", {"-c", script}, 1);
        EXPECT_TRUE(pool.ok()) << pool.error().describe();
        return pool.ok() ? std::move(pool).value() : nullptr;
    }
    int starts() const { return test::count_lines(dir_.path() + "/starts"); }

    test::TempDir dir_;
    std::string hello_path_;
};

TEST_F(WorkerDying, ExitMidRequestIsRetriedOnceThenAnIoError) {
    auto pool = pool_ending_with("exit 3");
    ASSERT_TRUE(pool);
    auto compiled = pool->compile_cuda(program_of(kScale, "scale.cu"), Target{90, false});
    ASSERT_FALSE(compiled.ok());
    EXPECT_EQ(compiled.error().code(), Errc::kIoError);
    EXPECT_NE(compiled.error().message().find("failed twice on scale.cu"), std::string::npos)
        << compiled.error().message();
    EXPECT_NE(compiled.error().message().find("exited with status 3"), std::string::npos);
    EXPECT_NE(compiled.error().message().find("/bin/sh"), std::string::npos);
    EXPECT_EQ(starts(), 2) << "one attempt and exactly one retry";
    EXPECT_TRUE(pool->worker_pids().empty());
}

TEST_F(WorkerDying, CrashOnTheSameRequestTwiceIsACompileFailure) {
    auto pool = pool_ending_with("kill -SEGV $$");
    ASSERT_TRUE(pool);
    auto compiled = pool->compile_cuda(program_of(kScale, "scale.cu"), Target{90, false});
    ASSERT_FALSE(compiled.ok());
    EXPECT_EQ(compiled.error().code(), Errc::kCompileFailed);
    EXPECT_NE(compiled.error().message().find("signal 11"), std::string::npos)
        << compiled.error().message();
    EXPECT_EQ(starts(), 2);
}

// Restores KCACHE_COMPILE_WORKER after a test changes it.
class WorkerCommandEnv : public ::testing::Test {
protected:
    void SetUp() override {
        if (const char* old = std::getenv("KCACHE_COMPILE_WORKER")) saved_ = old;
    }
    void TearDown() override {
        if (saved_) {
            ::setenv("KCACHE_COMPILE_WORKER", saved_->c_str(), 1);
        } else {
            ::unsetenv("KCACHE_COMPILE_WORKER");
        }
    }
    std::optional<std::string> saved_;
};

TEST_F(WorkerCommandEnv, EnvironmentNamesTheWorker) {
    ::setenv("KCACHE_COMPILE_WORKER", "/opt/x/kcache", 1);
    EXPECT_EQ(default_worker_command(), "/opt/x/kcache");
}

TEST_F(WorkerCommandEnv, SetButEmptyMeansNoWorkers) {
    ::setenv("KCACHE_COMPILE_WORKER", "", 1);
    EXPECT_EQ(default_worker_command(), "");
}

TEST_F(WorkerCommandEnv, UnsetFindsTheKcacheBesideThisProgram) {
    ::unsetenv("KCACHE_COMPILE_WORKER");
    // The test binary is built next to the tool.
    EXPECT_EQ(default_worker_command(), std::string(kTool));
}

}  // namespace
}  // namespace kcache::compile
