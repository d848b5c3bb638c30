// SPDX-License-Identifier: Apache-2.0
// A circuit breaker for one server: after a connect failure or a timeout the server is skipped
// (open) until a back-off passes; then one caller probes it (half open) while the others still
// skip it. A probe that succeeds closes the breaker; one that fails opens it again for twice as
// long, up to a ceiling. So a dead or stopped server costs a caller at most one timeout per
// back-off period, never one per lookup, and a long-running process finds it again when it returns.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>

namespace kcache::store::remote {

class CircuitBreaker {
public:
    using Clock = std::chrono::steady_clock;

    CircuitBreaker(std::chrono::milliseconds first_back_off, std::chrono::milliseconds max_back_off)
        : first_back_off_(first_back_off), max_back_off_(max_back_off) {}

    // Whether a request may go to the server now: closed, or the one probe after a back-off.
    bool allow(Clock::time_point now = Clock::now());
    // The request that allow() let through succeeded, or failed in a way that says the server is
    // unhealthy (not an error reply, which a healthy server gives).
    void succeeded();
    // True when this failure opened the breaker (counted as one opening).
    bool failed(Clock::time_point now = Clock::now());

    bool open() const;

private:
    enum class State : std::uint8_t { kClosed, kOpen, kProbing };

    const std::chrono::milliseconds first_back_off_, max_back_off_;
    mutable std::mutex mutex_;
    State state_ = State::kClosed;           // guarded by mutex_
    std::chrono::milliseconds back_off_{0};  // guarded by mutex_: the current period
    Clock::time_point retry_at_{};           // guarded by mutex_
};

}  // namespace kcache::store::remote
