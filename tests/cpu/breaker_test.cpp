// SPDX-License-Identifier: Apache-2.0
// The remote tier's circuit breaker: a failing server is skipped, probed once per back-off, and
// taken back when a probe succeeds.
#include "store/remote/breaker.hpp"

#include <gtest/gtest.h>

namespace kcache::store::remote {
namespace {

using namespace std::chrono_literals;
using Clock = CircuitBreaker::Clock;

TEST(CircuitBreakerTest, AClosedBreakerLetsEveryRequestThrough) {
    CircuitBreaker breaker(1s, 30s);
    const auto now = Clock::now();
    for (int i = 0; i < 100; ++i) EXPECT_TRUE(breaker.allow(now));
    EXPECT_FALSE(breaker.open());
}

TEST(CircuitBreakerTest, OneFailureSetsTheServerAsideUntilTheBackOffPasses) {
    CircuitBreaker breaker(1s, 30s);
    const auto t0 = Clock::now();
    EXPECT_TRUE(breaker.failed(t0)) << "the first failure opens it";
    EXPECT_TRUE(breaker.open());
    EXPECT_FALSE(breaker.allow(t0 + 500ms));
    EXPECT_FALSE(breaker.allow(t0 + 999ms));
    EXPECT_TRUE(breaker.allow(t0 + 1s)) << "one probe after the back-off";
}

TEST(CircuitBreakerTest, OnlyOneProbeAtATimeWhileItIsOpen) {
    CircuitBreaker breaker(1s, 30s);
    const auto t0 = Clock::now();
    breaker.failed(t0);
    EXPECT_TRUE(breaker.allow(t0 + 2s));
    for (int i = 0; i < 10; ++i) EXPECT_FALSE(breaker.allow(t0 + 2s)) << "others still skip it";
}

TEST(CircuitBreakerTest, ASuccessfulProbeClosesIt) {
    CircuitBreaker breaker(1s, 30s);
    const auto t0 = Clock::now();
    breaker.failed(t0);
    ASSERT_TRUE(breaker.allow(t0 + 1s));
    breaker.succeeded();
    EXPECT_FALSE(breaker.open());
    EXPECT_TRUE(breaker.allow(t0 + 1s));
    EXPECT_TRUE(breaker.allow(t0 + 1s));
    EXPECT_TRUE(breaker.failed(t0 + 2s)) << "a new failure is a new opening";
}

TEST(CircuitBreakerTest, AFailedProbeDoublesTheBackOffUpToTheCeiling) {
    CircuitBreaker breaker(1s, 4s);
    auto t = Clock::now();
    breaker.failed(t);
    std::chrono::milliseconds expected = 1s;
    for (int round = 0; round < 5; ++round) {
        EXPECT_FALSE(breaker.allow(t + expected - 1ms)) << "round " << round;
        ASSERT_TRUE(breaker.allow(t + expected)) << "round " << round;
        t += expected;
        EXPECT_FALSE(breaker.failed(t)) << "a failed probe is not a new opening";
        expected = std::min<std::chrono::milliseconds>(expected * 2, 4s);
    }
}

TEST(CircuitBreakerTest, FailuresOfRequestsAlreadyInFlightDoNotStretchThePeriod) {
    CircuitBreaker breaker(1s, 30s);
    const auto t0 = Clock::now();
    breaker.failed(t0);
    EXPECT_FALSE(breaker.failed(t0 + 900ms)) << "already open";
    EXPECT_TRUE(breaker.allow(t0 + 1s)) << "the probe comes when the first failure said";
}

}  // namespace
}  // namespace kcache::store::remote
