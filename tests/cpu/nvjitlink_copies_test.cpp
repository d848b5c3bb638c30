// SPDX-License-Identifier: Apache-2.0
// Copies of nvJitLink for links that run at once, and of NVRTC for programs that do
// (driver/nvjitlink_copies.hpp). Links: a link alone takes the process's own, links beside
// others each loaded copy once, on the copy's own thread, then the least busy, and wait a while
// for a copy being loaded, or until the own or a copy is let go; calls from several threads on one
// copy all run; links in copies and in the own from the same threads give the same cubin and end
// cleanly; a forked child keeps to the own, and can link when forked while others take theirs.
// Programs: alone the own NVRTC, beside another a copy's, called on its thread, counted apart from
// links; both compile the same cubin, on many threads at once too; a program under the loader's
// lock waits for no NVRTC load for ever, nor compiles first in a copy, and takes the own once it is
// let go; a forked child keeps to the own.
#include "driver/nvjitlink_copies.hpp"

#include <gtest/gtest.h>
#include <link.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "compile/compiler.hpp"
#include "driver/nvrtc.hpp"
#include "ptx_kernels.hpp"
#include "testing/scoped_env.hpp"

namespace kcache::driver {
namespace {

// KCACHE_NVJITLINK_COPIES for the death tests' children (each a new process that reads it once)
// while it lives. The tests under the loader's lock allow 3 copies, whatever this machine's
// default: a program's take() then starts NVRTC's loads into several copies at once, and each
// thread must start with the copies' lock let go and before any of those loads waits in dlmopen
// for the loader's lock, holding glibc's TLS lock that starting a thread waits for (runs of the
// two programs' tests hung when threads started under the copies' lock).
test::ScopedEnv copies_allowed(const char* copies) {
    return {"KCACHE_NVJITLINK_COPIES", copies};
}

class NvJitLinkCopiesTest : public ::testing::Test {
protected:
    void SetUp() override {
        if (!nvjitlink_api()) GTEST_SKIP() << "no nvJitLink here";
        if (nvjitlink_copies_allowed() == 0) {
            GTEST_SKIP() << "no copies allowed here (one hardware thread, a sanitizer build, or "
                            "KCACHE_NVJITLINK_COPIES=0)";
        }
    }

    static NvJitLinkLease lease() {
        auto taken = lease_nvjitlink();
        EXPECT_TRUE(taken.ok()) << taken.error().describe();
        return std::move(*taken);
    }

    // Loads every copy allowed (or as many as the loader gives), one link beside the own at a time.
    static std::size_t load_copies() {
        const NvJitLinkLease own = lease();
        EXPECT_FALSE(own.is_copy());
        for (std::size_t n = 0; n < nvjitlink_copies_allowed(); ++n) {
            { const NvJitLinkLease beside = lease(); }
            nvjitlink_copies_wait_for_loads();
        }
        return nvjitlink_copies_loaded();
    }

    // What a waiting thread got, and when: milliseconds from the release to its lease (-1: no
    // lease), and whether it was a copy.
    struct Got {
        double ms = -1;
        bool copy = false;
    };

    // Under the loader's lock (dl_iterate_phdr's), where no copy can load: another thread asks
    // `take` for a lease beside `held` (the own, or a copy as busy as the own) and waits for a
    // load that cannot end; `held` is let go `after` that.
    template <class Lease, class Take>
    static Got lease_once_let_go(std::optional<Lease> held, Take take,
                                 std::chrono::milliseconds after) {
        struct State {
            std::optional<Lease>* held;
            Take* take;
            std::chrono::milliseconds after;
            bool asked = false;
            Got got;
        } state{&held, &take, after, false, {}};
        dl_iterate_phdr(
            [](dl_phdr_info*, std::size_t, void* data) {
                auto* in = static_cast<State*>(data);
                if (in->asked) return 0;
                in->asked = true;
                std::atomic<bool> waiting{false};
                bool leased_one = false;
                bool copy = false;
                std::chrono::steady_clock::time_point leased;
                std::thread beside([&] {
                    waiting = true;
                    auto lease = (*in->take)();
                    leased = std::chrono::steady_clock::now();
                    leased_one = lease.ok();
                    copy = leased_one && lease->is_copy();
                });
                while (!waiting) std::this_thread::yield();
                std::this_thread::sleep_for(in->after);
                const auto let_go = std::chrono::steady_clock::now();
                in->held->reset();
                beside.join();
                if (leased_one) {
                    in->got.ms = std::chrono::duration<double, std::milli>(leased - let_go).count();
                    in->got.copy = copy;
                }
                return 0;
            },
            &state);
        return state.got;
    }
};

TEST_F(NvJitLinkCopiesTest, ALinkAloneTakesTheProcesssOwn) {
    const NvJitLinkLease alone = lease();
    EXPECT_FALSE(alone.is_copy());
    EXPECT_EQ(&alone.api(), *nvjitlink_api());
}

TEST_F(NvJitLinkCopiesTest, LinksBesideOthersTakeEachCopyOnceThenTheLeastBusy) {
    const std::size_t loaded = load_copies();
    ASSERT_GE(loaded, 1u);
    const NvJitLinkLease first = lease();
    ASSERT_FALSE(first.is_copy());
    std::vector<NvJitLinkLease> held;
    for (std::size_t n = 0; n < loaded; ++n) {
        held.push_back(lease());
        ASSERT_TRUE(held.back().is_copy()) << n;
        EXPECT_NE(held.back().api().enter_thread, nullptr);
        for (std::size_t other = 0; other < n; ++other) {
            EXPECT_NE(&held[other].api(), &held.back().api()) << "a copy already running a link";
        }
        std::thread::id where;
        EXPECT_TRUE(held.back().run([&] { where = std::this_thread::get_id(); }));
        EXPECT_NE(where, std::this_thread::get_id()) << "a copy's calls run on its own thread";
    }
    const NvJitLinkApi* given_back = &held.back().api();
    held.pop_back();
    const NvJitLinkLease again = lease();
    EXPECT_TRUE(again.is_copy());
    EXPECT_EQ(&again.api(), given_back) << "the one running no link";
    // Every nvJitLink runs a link now: the next shares one, and no load starts.
    const NvJitLinkLease shared = lease();
    nvjitlink_copies_wait_for_loads();
    EXPECT_EQ(nvjitlink_copies_loaded(), loaded);
}

// The links a warm-up starts together: the second finds the own busy and no copy loaded yet, and
// waits for the copy it starts loading instead of sharing the own with the first. In a process of
// its own, where no copy is loaded yet.
TEST_F(NvJitLinkCopiesTest, ALinkBesideTheBusyOwnWaitsForTheCopyItStartsLoading) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(
        {
            if (nvjitlink_copies_loaded() != 0) _exit(3);
            auto own = lease_nvjitlink();
            if (!own.ok() || own->is_copy()) _exit(4);
            auto beside = lease_nvjitlink();
            _exit(beside.ok() && beside->is_copy() ? 0 : 1);
        },
        ::testing::ExitedWithCode(0), "");
}

// A load that cannot end while this thread holds the loader's lock (here dl_iterate_phdr's; a
// link inside a library's constructor holds dlopen's): the link waits a while, then shares the
// own, and the copy is there once the lock is let go.
TEST_F(NvJitLinkCopiesTest, ALinkWaitsForAStuckLoadOnlyAWhile) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(
        {
            alarm(20);  // a hang fails the test instead of stalling it
            if (nvjitlink_copies_loaded() != 0) _exit(3);
            auto own = lease_nvjitlink();
            if (!own.ok() || own->is_copy()) _exit(4);
            struct Seen {
                bool asked = false;
                bool copy = true;
            } seen;
            dl_iterate_phdr(
                [](dl_phdr_info*, std::size_t, void* data) {
                    auto* in = static_cast<Seen*>(data);
                    if (in->asked) return 0;
                    in->asked = true;
                    auto beside = lease_nvjitlink();
                    in->copy = !beside.ok() || beside->is_copy();
                    return 0;
                },
                &seen);
            if (seen.copy) _exit(1);  // not a copy: none could load while the lock was held
            nvjitlink_copies_wait_for_loads();
            auto after = lease_nvjitlink();
            _exit(nvjitlink_copies_loaded() == 1 && after.ok() && after->is_copy() ? 0 : 2);
        },
        ::testing::ExitedWithCode(0), "");
}

// A link waiting for a copy's load takes the own as soon as the own is let go, not once its
// patience (100 ms) ends: the own's link may be short. Under the loader's lock, where the load
// cannot end; the own let go 20 ms into the wait.
TEST_F(NvJitLinkCopiesTest, ALinkWaitingForALoadTakesTheOwnOnceItIsLetGo) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    const test::ScopedEnv three = copies_allowed("3");
    EXPECT_EXIT(
        {
            alarm(20);
            if (nvjitlink_copies_loaded() != 0) _exit(3);
            auto own = lease_nvjitlink();
            if (!own.ok() || own->is_copy()) _exit(4);
            const Got got = lease_once_let_go<NvJitLinkLease>(
                std::move(*own), [] { return lease_nvjitlink(); }, std::chrono::milliseconds(20));
            if (got.ms < 0 || got.copy) _exit(1);
            _exit(got.ms < 60 ? 0 : 2);
        },
        ::testing::ExitedWithCode(0), "");
}

// The same where a copy as busy as the own is let go: the waiting link takes that copy then, not
// once its patience ends. Two copies allowed: one loaded and held, the other's load stuck.
TEST_F(NvJitLinkCopiesTest, ALinkWaitingForALoadTakesACopyOnceItIsLetGo) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    const test::ScopedEnv two = copies_allowed("2");
    EXPECT_EXIT(
        {
            alarm(20);
            if (nvjitlink_copies_allowed() != 2 || nvjitlink_copies_loaded() != 0) _exit(3);
            auto own = lease_nvjitlink();
            if (!own.ok() || own->is_copy()) _exit(4);
            std::optional<NvJitLinkLease> copy;
            if (auto beside = lease_nvjitlink(); beside.ok() && beside->is_copy()) {
                copy.emplace(std::move(*beside));
            }
            if (!copy) _exit(5);
            nvjitlink_copies_wait_for_loads();
            const Got got = lease_once_let_go<NvJitLinkLease>(
                std::move(copy), [] { return lease_nvjitlink(); }, std::chrono::milliseconds(20));
            if (got.ms < 0 || !got.copy) _exit(1);
            _exit(got.ms < 60 ? 0 : 2);
        },
        ::testing::ExitedWithCode(0), "");
}

// A session takes one call at a time, but calls on a copy's lease from several threads at once
// must each run, one after another, never be dropped.
TEST_F(NvJitLinkCopiesTest, CallsOnACopyFromSeveralThreadsAtOnceAllRun) {
    ASSERT_GE(load_copies(), 1u);
    const NvJitLinkLease own = lease();
    const NvJitLinkLease copy = lease();
    ASSERT_TRUE(copy.is_copy());
    constexpr int kCalls = 2000;
    int ran = 0;  // written only on the copy's thread, one call at a time
    std::vector<std::thread> threads;
    threads.reserve(3);
    for (int t = 0; t < 3; ++t) {
        threads.emplace_back([&] {
            for (int n = 0; n < kCalls; ++n) EXPECT_TRUE(copy.run([&] { ++ran; }));
        });
    }
    for (auto& thread : threads) thread.join();
    int seen = 0;
    EXPECT_TRUE(copy.run([&] { seen = ran; }));
    EXPECT_EQ(seen, 3 * kCalls);
}

// A copy's C library keeps its thread-specific data in the slots of the first one's thread
// descriptor: a thread that linked in a copy, then in the process's own, had the own free the
// copy's data into the wrong heap (and the first C library freed it again at the thread's exit).
// Copies run on threads of their own; the threads that ask them never run a copy's code.
TEST_F(NvJitLinkCopiesTest, AThreadLinksInACopyThenInTheOwnAndEndsCleanly) {
    ASSERT_GE(load_copies(), 1u);
    auto own = compile::link_ptx(examples::residual_add_ptx(), compile::Target{90, false});
    ASSERT_TRUE(own.ok()) << own.error().describe();
    for (int round = 0; round < 3; ++round) {
        std::optional<Result<compile::Compiled>> in_copy, in_own;
        std::thread thread([&] {
            {
                const NvJitLinkLease held = lease();  // the own: the link below takes a copy
                in_copy =
                    compile::link_ptx(examples::residual_add_ptx(), compile::Target{90, false});
            }
            in_own = compile::link_ptx(examples::residual_add_ptx(), compile::Target{90, false});
        });
        thread.join();
        ASSERT_TRUE(in_copy && in_copy->ok()) << (in_copy ? in_copy->error().describe() : "");
        ASSERT_TRUE(in_own && in_own->ok()) << (in_own ? in_own->error().describe() : "");
        EXPECT_EQ((*in_copy)->cubin, own->cubin) << "round " << round;
        EXPECT_EQ((*in_own)->cubin, own->cubin) << "round " << round;
    }
    EXPECT_GE(nvjitlink_copies_loaded(), 1u);
}

TEST_F(NvJitLinkCopiesTest, LinksAtOnceOnManyThreadsAllMatchTheOwnsCubin) {
    auto own = compile::link_ptx(examples::residual_add_ptx(), compile::Target{90, false});
    ASSERT_TRUE(own.ok()) << own.error().describe();
    constexpr int kThreads = 6;
    std::vector<std::optional<Result<compile::Compiled>>> linked(kThreads);
    std::vector<std::thread> threads;
    threads.reserve(kThreads);
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            for (int n = 0; n < 4; ++n) {
                linked[t] =
                    compile::link_ptx(examples::residual_add_ptx(), compile::Target{90, false});
                if (!linked[t]->ok() || (*linked[t])->cubin != own->cubin) return;
            }
        });
    }
    for (auto& thread : threads) thread.join();
    for (int t = 0; t < kThreads; ++t) {
        ASSERT_TRUE(linked[t] && linked[t]->ok()) << t;
        EXPECT_EQ((*linked[t])->cubin, own->cubin) << t;
    }
}

// A child forked while links hold the own and a copy: the copies' threads are not in the child,
// so its links share the own, and a copy's lease taken before the fork runs nothing there instead
// of waiting for ever.
TEST_F(NvJitLinkCopiesTest, AForkedChildKeepsToTheOwn) {
    ASSERT_GE(load_copies(), 1u);
    const NvJitLinkLease held = lease();
    ASSERT_FALSE(held.is_copy());
    const NvJitLinkLease copy = lease();
    ASSERT_TRUE(copy.is_copy());
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        alarm(20);  // a hang fails the test instead of stalling it
        auto taken = lease_nvjitlink();
        if (!taken.ok() || taken->is_copy()) _exit(1);
        bool ran = false;
        _exit(copy.run([&] { ran = true; }) || ran ? 2 : 0);
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
}

// Children forked while other threads take and give back nvJitLinks: the choice's lock must not
// be copied into a child held by a thread the child does not have.
TEST_F(NvJitLinkCopiesTest, ChildrenForkedWhileOtherThreadsLeaseCanLink) {
    std::atomic<bool> stop{false};
    std::vector<std::thread> threads;
    threads.reserve(3);
    for (int t = 0; t < 3; ++t) {
        threads.emplace_back([&] {
            while (!stop.load()) (void)lease_nvjitlink();
        });
    }
    int hung = 0;
    bool forked = true;  // every fork and wait worked (the threads are joined before any assert)
    for (int round = 0; round < 200 && hung == 0 && forked; ++round) {
        const pid_t child = fork();
        if (child == 0) {
            alarm(5);  // a child left waiting on the lock dies of the alarm
            auto taken = lease_nvjitlink();
            _exit(taken.ok() && !taken->is_copy() ? 0 : 1);
        }
        int status = 0;
        forked = child > 0 && waitpid(child, &status, 0) == child;
        if (forked && (!WIFEXITED(status) || WEXITSTATUS(status) != 0)) hung = round + 1;
    }
    stop = true;
    for (auto& thread : threads) thread.join();
    EXPECT_TRUE(forked);
    EXPECT_EQ(hung, 0) << "a child forked in round " << hung << " could not take an nvJitLink";
}

// NVRTC programs beside others take copies of NVRTC loaded into the copies' link maps
// (driver/nvjitlink_copies.hpp): one NVRTC compiles one program at a time.
class NvrtcCopiesTest : public NvJitLinkCopiesTest {
protected:
    void SetUp() override {
        if (!nvrtc_api()) GTEST_SKIP() << "no NVRTC here";
        NvJitLinkCopiesTest::SetUp();
    }

    static NvrtcLease program_lease() {
        auto taken = lease_nvrtc();
        EXPECT_TRUE(taken.ok()) << taken.error().describe();
        return std::move(*taken);
    }

    // The cubin of kScaleSource's `scale` for sm_90, compiled by a program made now.
    static Result<std::string> compile_scale() {
        auto program = NvrtcProgram::create(kScaleSource, "scale.cu", {});
        if (!program) return std::move(program).error();
        const NvrtcCompile compiled = program->compile({"-arch=sm_90"});
        if (compiled.status != NvrtcCompile::Status::kSucceeded) {
            return Error(Errc::kCompileFailed, compiled.error, compiled.log);
        }
        return program->cubin();
    }

    // Whether compile_scale() succeeds while this thread holds the loader's lock
    // (dl_iterate_phdr's; a compile inside a library's constructor holds dlopen's).
    static bool compiles_under_the_loaders_lock() {
        struct Seen {
            bool asked = false;
            bool compiled = false;
        } seen;
        dl_iterate_phdr(
            [](dl_phdr_info*, std::size_t, void* data) {
                auto* in = static_cast<Seen*>(data);
                if (in->asked) return 0;
                in->asked = true;
                in->compiled = compile_scale().ok();
                return 0;
            },
            &seen);
        return seen.compiled;
    }

    static constexpr const char* kScaleSource = R"(
extern "C" __global__ void scale(float* x, float by, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= by;
}
)";
};

TEST_F(NvrtcCopiesTest, AProgramAloneTakesTheProcesssOwnNvrtc) {
    const NvrtcLease alone = program_lease();
    EXPECT_FALSE(alone.is_copy());
    EXPECT_EQ(&alone.api(), *nvrtc_api());
}

TEST_F(NvrtcCopiesTest, AProgramBesideAnotherTakesACopysNvrtcOnTheCopysThread) {
    ASSERT_GE(load_copies(), 1u);
    const NvrtcLease own = program_lease();
    ASSERT_FALSE(own.is_copy());
    const NvrtcLease beside = program_lease();
    ASSERT_TRUE(beside.is_copy());
    EXPECT_NE(&beside.api(), &own.api()) << "another NVRTC, with its own lock";
    EXPECT_EQ(beside.api().library_path, own.api().library_path) << "the same file";
    std::thread::id where;
    int major = 0, minor = 0;
    EXPECT_TRUE(beside.run([&] {
        where = std::this_thread::get_id();
        beside.api().nvrtcVersion(&major, &minor);
    }));
    EXPECT_NE(where, std::this_thread::get_id()) << "a copy's calls run on its own thread";
    EXPECT_EQ(major, own.api().major);
    EXPECT_EQ(minor, own.api().minor);
    // Links count apart from programs: a link beside these programs still takes the own.
    const NvJitLinkLease link = lease();
    EXPECT_FALSE(link.is_copy());
}

TEST_F(NvrtcCopiesTest, ProgramsInTheOwnAndInACopyCompileTheSameCubin) {
    ASSERT_GE(load_copies(), 1u);
    auto alone = compile_scale();
    ASSERT_TRUE(alone.ok()) << alone.error().describe();
    // A program held open: the next ones take a copy.
    auto held = NvrtcProgram::create(kScaleSource, "scale.cu", {});
    ASSERT_TRUE(held.ok()) << held.error().describe();
    for (int round = 0; round < 2; ++round) {
        auto beside = compile_scale();
        ASSERT_TRUE(beside.ok()) << beside.error().describe();
        EXPECT_EQ(*beside, *alone) << "round " << round;
    }
    const NvrtcCompile compiled = held->compile({"-arch=sm_90"});
    ASSERT_EQ(compiled.status, NvrtcCompile::Status::kSucceeded) << compiled.log;
    auto cubin = held->cubin();
    ASSERT_TRUE(cubin.ok()) << cubin.error().describe();
    EXPECT_EQ(*cubin, *alone);
}

TEST_F(NvrtcCopiesTest, ProgramsAndLinksAtOnceOnManyThreadsAllMatchTheOwnsOutput) {
    auto cubin = compile_scale();
    ASSERT_TRUE(cubin.ok()) << cubin.error().describe();
    auto linked = compile::link_ptx(examples::residual_add_ptx(), compile::Target{90, false});
    ASSERT_TRUE(linked.ok()) << linked.error().describe();
    constexpr int kThreads = 6;
    std::vector<std::optional<Result<std::string>>> compiled(kThreads);
    std::vector<std::optional<Result<compile::Compiled>>> links(kThreads);
    std::vector<std::thread> threads;
    threads.reserve(kThreads);
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            for (int n = 0; n < 2; ++n) {
                compiled[t] = compile_scale();
                links[t] =
                    compile::link_ptx(examples::residual_add_ptx(), compile::Target{90, false});
                if (!compiled[t]->ok() || !links[t]->ok()) return;
            }
        });
    }
    for (auto& thread : threads) thread.join();
    for (int t = 0; t < kThreads; ++t) {
        ASSERT_TRUE(compiled[t] && compiled[t]->ok()) << t;
        EXPECT_EQ(**compiled[t], *cubin) << t;
        ASSERT_TRUE(links[t] && links[t]->ok()) << t;
        EXPECT_EQ((*links[t])->cubin, linked->cubin) << t;
    }
}

// A CUDA C++ compile while this thread holds the loader's lock (dl_iterate_phdr's here; a compile
// inside a library's constructor holds dlopen's), beside another program in the own NVRTC: no
// NVRTC can be loaded into a copy meanwhile, so the program waits a while, then shares the own,
// and compiles. In a process of its own, where no NVRTC copy is loaded yet. (The own has compiled
// before: its first compile loads NVRTC's builtins, and a dlopen under dl_iterate_phdr's lock
// while another thread loads a library waits for ever, with or without kcache.)
TEST_F(NvrtcCopiesTest, AProgramWaitsForAStuckNvrtcLoadOnlyAWhile) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    const test::ScopedEnv three = copies_allowed("3");
    EXPECT_EXIT(
        {
            alarm(30);  // a hang fails the test instead of stalling it
            if (load_copies() == 0) _exit(5);
            auto held = NvrtcProgram::create(kScaleSource, "scale.cu", {});
            if (!held.ok()) _exit(4);
            if (held->compile({"-arch=sm_90"}).status != NvrtcCompile::Status::kSucceeded) {
                _exit(3);
            }
            if (!compiles_under_the_loaders_lock()) _exit(1);
            nvjitlink_copies_wait_for_loads();
            auto after = lease_nvrtc();
            _exit(after.ok() && after->is_copy() ? 0 : 2);
        },
        ::testing::ExitedWithCode(0), "");
}

// A program waiting for a copy's NVRTC takes the own NVRTC as soon as the own is let go, not once
// its patience (500 ms) ends: a short compile would otherwise wait for NVRTC's loads into the
// copies (16 light kernels on 16 threads of an H100 ran 1.31x one thread with copies, 1.77x
// without). Under the loader's lock, where NVRTC cannot load into a copy; the own let go 50 ms
// into the wait.
TEST_F(NvrtcCopiesTest, AProgramWaitingForACopysNvrtcTakesTheOwnOnceItIsLetGo) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    const test::ScopedEnv three = copies_allowed("3");
    EXPECT_EXIT(
        {
            alarm(30);
            if (load_copies() == 0) _exit(5);
            auto own = lease_nvrtc();
            if (!own.ok() || own->is_copy()) _exit(4);
            const Got got = lease_once_let_go<NvrtcLease>(
                std::move(*own), [] { return lease_nvrtc(); }, std::chrono::milliseconds(50));
            if (got.ms < 0 || got.copy) _exit(1);
            _exit(got.ms < 250 ? 0 : 2);
        },
        ::testing::ExitedWithCode(0), "");
}

// A copy's NVRTC compiled once before any program takes it: a program's first compile in the
// copy, under the loader's lock, loads nothing (NVRTC's builtins, the CUDA driver) and ends.
TEST_F(NvrtcCopiesTest, AProgramsFirstCompileInACopyUnderTheLoadersLockEnds) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(
        {
            alarm(30);
            if (load_copies() == 0) _exit(5);
            auto held = NvrtcProgram::create(kScaleSource, "scale.cu", {});
            if (!held.ok()) _exit(4);
            (void)lease_nvrtc();  // starts NVRTC's loads into the copies
            nvjitlink_copies_wait_for_loads();
            {
                auto loaded = lease_nvrtc();
                if (!loaded.ok() || !loaded->is_copy()) _exit(6);
            }
            _exit(compiles_under_the_loaders_lock() ? 0 : 1);
        },
        ::testing::ExitedWithCode(0), "");
}

// A process that ends while NVRTC loads into its copies in the background (and compiles once
// there): its end waits for the loads rather than finalising the libraries under them (a crash
// in a few of 20 runs before). Several processes of their own, each ending through exit().
TEST_F(NvrtcCopiesTest, AProcessEndingWhileNvrtcLoadsIntoCopiesEndsCleanly) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    for (int round = 0; round < 3; ++round) {
        EXPECT_EXIT(
            {
                alarm(30);
                if (load_copies() == 0) _exit(5);
                auto held = NvrtcProgram::create(kScaleSource, "scale.cu", {});
                if (!held.ok()) _exit(4);
                std::thread beside([] { (void)lease_nvrtc(); });  // starts the loads
                beside.detach();
                std::this_thread::sleep_for(std::chrono::milliseconds(5 + 10 * round));
                std::exit(0);
            },
            ::testing::ExitedWithCode(0), "")
            << "round " << round;
    }
}

// A program's copy taken before fork() cannot run in the child: its calls fail, saying why,
// instead of waiting for ever on a thread the child does not have; the child's own programs
// keep to the own NVRTC and compile.
TEST_F(NvrtcCopiesTest, AForkedChildKeepsToTheOwnNvrtc) {
    ASSERT_GE(load_copies(), 1u);
    auto own = NvrtcProgram::create(kScaleSource, "scale.cu", {});
    ASSERT_TRUE(own.ok()) << own.error().describe();
    auto in_copy = NvrtcProgram::create(kScaleSource, "scale.cu", {});
    ASSERT_TRUE(in_copy.ok()) << in_copy.error().describe();
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        alarm(60);  // a hang fails the test instead of stalling it
        auto taken = lease_nvrtc();
        if (!taken.ok() || taken->is_copy()) _exit(1);
        // The two programs of before: one in the own NVRTC compiles, the copy's says why not.
        const NvrtcCompile in_own = own->compile({"-arch=sm_90"});
        const NvrtcCompile copied = in_copy->compile({"-arch=sm_90"});
        const bool one_failed = (in_own.status == NvrtcCompile::Status::kSucceeded) !=
                                (copied.status == NvrtcCompile::Status::kSucceeded);
        const NvrtcCompile& failed =
            in_own.status == NvrtcCompile::Status::kSucceeded ? copied : in_own;
        if (!one_failed || failed.error.find("fork()") == std::string::npos) _exit(2);
        _exit(compile_scale().ok() ? 0 : 3);
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
}

}  // namespace
}  // namespace kcache::driver
