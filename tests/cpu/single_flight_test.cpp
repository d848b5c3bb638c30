// SPDX-License-Identifier: Apache-2.0
// Single flight: of all threads that miss one (key, arch) at once, one compiles and the others
// wait for its outcome; different keys do not wait for each other.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <latch>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kcache/kcache.hpp"
#include "test_support.hpp"
#include "testing/fake_driver.hpp"

namespace kcache {
namespace {

using fakes::FakeDriver;
using namespace std::chrono_literals;

struct Outcome {
    std::optional<Result<KernelHandle>> handle;
    bool launched = false;
};

// Starts `threads` threads together (std::latch) on cache.kernel(key, ...), each launching the
// handle it gets on its own thread. The fake's load delay keeps the first compile in the air while
// the others arrive.
template <class MakeSource>
std::vector<Outcome> miss_together(KernelCache& cache, int threads, const std::string& key,
                                   MakeSource make_source, const char* kernel_name) {
    std::vector<Outcome> outcomes(static_cast<std::size_t>(threads));
    std::latch start(threads);
    std::vector<std::thread> workers;
    for (int i = 0; i < threads; ++i) {
        workers.emplace_back([&, i] {
            start.arrive_and_wait();
            auto& outcome = outcomes[static_cast<std::size_t>(i)];
            outcome.handle.emplace(cache.kernel(key, make_source, kernel_name));
            if (outcome.handle->ok()) {
                outcome.launched = test::launch_residual_add(outcome.handle->value()).ok();
            }
        });
    }
    for (auto& worker : workers) worker.join();
    return outcomes;
}

class SingleFlightTest : public ::testing::Test {
protected:
    void SetUp() override { fake->set_load_delay(50ms); }

    std::vector<Outcome> sixteen_misses() {
        return miss_together(
            cache, 16, "residual_add:f32",
            [this] {
                generator_calls.fetch_add(1);
                return test::residual_add_source();
            },
            "residual_add");
    }

    std::shared_ptr<FakeDriver> fake = std::make_shared<FakeDriver>();
    KernelCache cache{test::fake_options(fake)};
    std::atomic<int> generator_calls{0};
};

TEST_F(SingleFlightTest, SixteenConcurrentMissesLoadOnce) {
    sixteen_misses();
    EXPECT_EQ(fake->load_attempts(), 1);
    EXPECT_EQ(fake->loads(), 1);
    EXPECT_EQ(cache.stats().compiles, 1u);
}

TEST_F(SingleFlightTest, SixteenConcurrentMissesRunTheGeneratorOnce) {
    sixteen_misses();
    EXPECT_EQ(generator_calls.load(), 1);
}

TEST_F(SingleFlightTest, EveryConcurrentMisserGetsAWorkingHandle) {
    auto outcomes = sixteen_misses();
    for (std::size_t i = 0; i < outcomes.size(); ++i) {
        ASSERT_TRUE(outcomes[i].handle.has_value());
        EXPECT_TRUE(outcomes[i].handle->ok())
            << "thread " << i << ": " << outcomes[i].handle->error().describe();
        EXPECT_TRUE(outcomes[i].launched) << "thread " << i;
    }
    EXPECT_EQ(fake->launches_of("residual_add"), 16);
    EXPECT_EQ(fake->use_after_unload(), 0);
}

TEST_F(SingleFlightTest, ThreadsThatWaitedForAnotherThreadsCompileAreCounted) {
    sixteen_misses();
    EXPECT_EQ(cache.stats().waits, 15u);
}

TEST_F(SingleFlightTest, FailedCompileIsReturnedToEveryWaiterWithItsLog) {
    auto outcomes = miss_together(
        cache, 8, "broken", [] { return test::broken_source(); }, "residual_add");

    for (std::size_t i = 0; i < outcomes.size(); ++i) {
        ASSERT_TRUE(outcomes[i].handle.has_value());
        const auto& handle = *outcomes[i].handle;
        ASSERT_FALSE(handle.ok()) << "thread " << i;
        EXPECT_EQ(handle.error().code(), Errc::kCompileFailed) << "thread " << i;
        EXPECT_NE(handle.error().log().find("FAKE_JIT_ERROR"), std::string::npos)
            << "thread " << i << " got no JIT log: " << handle.error().describe();
    }
    EXPECT_EQ(fake->load_attempts(), 1) << "waiters retried the failed compile themselves";
}

TEST_F(SingleFlightTest, FailedSharedCompileIsNotCachedAndALaterCallRetries) {
    miss_together(
        cache, 8, "residual_add:f32", [] { return test::broken_source(); }, "residual_add");
    ASSERT_EQ(fake->load_attempts(), 1);
    EXPECT_EQ(cache.size(), 0u);

    fake->set_load_delay(0ms);
    auto later = cache.kernel(
        "residual_add:f32", [] { return test::residual_add_source(); }, "residual_add");

    ASSERT_TRUE(later.ok()) << later.error().describe();
    EXPECT_EQ(fake->load_attempts(), 2);
    EXPECT_EQ(cache.size(), 1u);
}

TEST_F(SingleFlightTest, DifferentKeysCompileInParallel) {
    fake->set_load_delay(100ms);
    std::latch start(3);
    std::optional<Result<KernelHandle>> a;
    std::optional<Result<KernelHandle>> b;
    std::thread first([&] {
        start.arrive_and_wait();
        a.emplace(cache.kernel(
            test::softmax_key(32), [] { return test::softmax_source(32); }, test::kSoftmax));
    });
    std::thread second([&] {
        start.arrive_and_wait();
        b.emplace(cache.kernel(
            test::softmax_key(64), [] { return test::softmax_source(64); }, test::kSoftmax));
    });
    start.arrive_and_wait();
    const auto began = std::chrono::steady_clock::now();
    first.join();
    second.join();
    const double wall_ms = test::elapsed_ms(began);

    ASSERT_TRUE(a->ok() && b->ok());
    EXPECT_EQ(fake->loads(), 2);
    EXPECT_LT(wall_ms, 180.0) << "two 100 ms compiles of different keys ran one after the other";
}

TEST_F(SingleFlightTest, OneKeyOnTwoArchsCompilesInParallel) {
    fake->set_load_delay(100ms);
    std::latch start(3);
    std::optional<Result<KernelHandle>> sm80;
    std::optional<Result<KernelHandle>> sm90;
    auto lookup = [&](int arch, std::optional<Result<KernelHandle>>& out) {
        FakeDriver::ScopedContext context(arch);
        start.arrive_and_wait();
        out.emplace(cache.kernel(
            "residual_add:f32", [] { return test::residual_add_source(); }, "residual_add"));
    };
    std::thread first(lookup, 80, std::ref(sm80));
    std::thread second(lookup, 90, std::ref(sm90));
    start.arrive_and_wait();
    const auto began = std::chrono::steady_clock::now();
    first.join();
    second.join();
    const double wall_ms = test::elapsed_ms(began);

    ASSERT_TRUE(sm80->ok() && sm90->ok());
    EXPECT_EQ(fake->loads(), 2);
    EXPECT_EQ(cache.stats().waits, 0u);
    EXPECT_LT(wall_ms, 180.0);
}

}  // namespace
}  // namespace kcache
