// SPDX-License-Identifier: Apache-2.0
#include "store/remote/breaker.hpp"

#include <algorithm>

namespace kcache::store::remote {

bool CircuitBreaker::allow(Clock::time_point now) {
    std::lock_guard lock(mutex_);
    switch (state_) {
        case State::kClosed:
            return true;
        case State::kProbing:
            return false;  // one probe at a time: the others skip the server meanwhile
        case State::kOpen:
            if (now < retry_at_) return false;
            state_ = State::kProbing;
            return true;
    }
    return false;
}

void CircuitBreaker::succeeded() {
    std::lock_guard lock(mutex_);
    state_ = State::kClosed;
    back_off_ = std::chrono::milliseconds{0};
}

bool CircuitBreaker::failed(Clock::time_point now) {
    std::lock_guard lock(mutex_);
    const bool opening = state_ == State::kClosed;
    // A failed probe doubles the period; the first failure starts it. Requests that were already
    // in flight when it opened fail too, and must not stretch it.
    if (state_ == State::kProbing) {
        back_off_ = std::min(max_back_off_, back_off_ * 2);
    } else if (opening) {
        back_off_ = first_back_off_;
    }
    if (state_ != State::kOpen) retry_at_ = now + back_off_;
    state_ = State::kOpen;
    return opening;
}

bool CircuitBreaker::open() const {
    std::lock_guard lock(mutex_);
    return state_ != State::kClosed;
}

}  // namespace kcache::store::remote
