// SPDX-License-Identifier: Apache-2.0
// Single flight: of all threads that miss one key at once, one (the leader) compiles; the others
// wait for its outcome. The lock is never held during the compile (librtcx's placeholder-future
// pattern).
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "kcache/result.hpp"

namespace kcache::util {

class SingleFlight {
public:
    class Flight {
    public:
        // Blocks until the leader finishes; the leader's error if it failed.
        std::optional<Error> wait();
        // After wait(): what the leader handed over on success (null if nothing), for waiters
        // that cannot find the result elsewhere.
        std::shared_ptr<const void> value() const;

    private:
        friend class SingleFlight;
        mutable std::mutex mutex_;
        std::condition_variable done_cv_;
        bool done_ = false;                  // guarded by mutex_
        std::optional<Error> error_;         // guarded by mutex_
        std::shared_ptr<const void> value_;  // guarded by mutex_
    };

    struct Ticket {
        std::shared_ptr<Flight> flight;
        bool leader = false;
    };

    // Joins the flight for `id`, starting one (and becoming its leader) if none is in the air.
    Ticket join(const std::string& id);

    // Leader only: lands the flight. Waiters wake with `error` (nullopt: success, look again).
    // A later join() for `id` starts a new flight, so a failure is never cached.
    void finish(const std::string& id, const std::shared_ptr<Flight>& flight,
                std::optional<Error> error, std::shared_ptr<const void> value = nullptr);

    // The leader's side of a flight, which lands it however the leader leaves (an exception
    // included), so that waiters never block on a flight nobody will finish: with the error
    // given by fail(), or as abandoned, unless succeed() came first.
    class Landing {
    public:
        Landing(SingleFlight& flights, std::string id, std::shared_ptr<Flight> flight)
            : flights_(flights), id_(std::move(id)), flight_(std::move(flight)) {}
        ~Landing() { flights_.finish(id_, flight_, std::move(error_), std::move(value_)); }
        Landing(const Landing&) = delete;
        Landing& operator=(const Landing&) = delete;

        void succeed(std::shared_ptr<const void> value = nullptr) {
            error_.reset();
            value_ = std::move(value);
        }
        void fail(Error error) { error_ = std::move(error); }

    private:
        SingleFlight& flights_;
        const std::string id_;
        const std::shared_ptr<Flight> flight_;
        std::optional<Error> error_ = Error(Errc::kSourceFailed, "the compile was abandoned");
        std::shared_ptr<const void> value_;
    };

private:
    mutable std::mutex mutex_;
    std::unordered_map<std::string, std::shared_ptr<Flight>> flights_;  // guarded by mutex_
};

}  // namespace kcache::util
