// SPDX-License-Identifier: Apache-2.0
#include "util/single_flight.hpp"

namespace kcache::util {

std::optional<Error> SingleFlight::Flight::wait() {
    std::unique_lock lock(mutex_);
    done_cv_.wait(lock, [this] { return done_; });
    return error_;
}

std::shared_ptr<const void> SingleFlight::Flight::value() const {
    std::lock_guard lock(mutex_);
    return value_;
}

SingleFlight::Ticket SingleFlight::join(const std::string& id) {
    std::lock_guard lock(mutex_);
    auto [it, inserted] = flights_.try_emplace(id);
    if (inserted) it->second = std::make_shared<Flight>();
    return {it->second, inserted};
}

void SingleFlight::finish(const std::string& id, const std::shared_ptr<Flight>& flight,
                          std::optional<Error> error, std::shared_ptr<const void> value) {
    {
        std::lock_guard lock(mutex_);
        auto it = flights_.find(id);
        if (it != flights_.end() && it->second == flight) flights_.erase(it);
    }
    {
        std::lock_guard lock(flight->mutex_);
        flight->done_ = true;
        flight->error_ = std::move(error);
        flight->value_ = std::move(value);
    }
    flight->done_cv_.notify_all();
}

}  // namespace kcache::util
