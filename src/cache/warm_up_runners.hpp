// SPDX-License-Identifier: Apache-2.0
// The threads a warm-up's bundle phase runs its items on: on_workers() for items of a few
// microseconds each (a generator and a hash), Ahead for items taken in order while the caller
// loads those before (a bundle's lookup or link).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "util/log.hpp"

namespace kcache::cache {

// Runs `each(n)` for every n below `count` on worker threads, never the caller's (a warm-up
// makes nothing on it): `first` at first, and one more each time `patience` passes with items
// left, up to `threads`. A thread that cannot start stops the growth; with none, the caller runs
// them.
template <class Each>
void on_workers(std::size_t count, unsigned first, unsigned threads,
                std::chrono::microseconds patience, Each each) {
    std::atomic<std::size_t> next{0};
    std::mutex mutex;
    std::condition_variable all_done;
    std::size_t done = 0;  // guarded by mutex
    auto work = [&] {
        for (std::size_t n = next.fetch_add(1); n < count; n = next.fetch_add(1)) {
            each(n);
            std::lock_guard lock(mutex);
            if (++done == count) all_done.notify_all();
        }
    };
    const unsigned most = std::max(1u, std::min<unsigned>(threads, static_cast<unsigned>(count)));
    std::vector<std::thread> pool;
    pool.reserve(most);  // no allocation while threads run
    bool can_grow = true;
    auto grow = [&] {
        if (!can_grow || pool.size() >= most || next.load() >= count) return;
        try {
            pool.emplace_back(work);
        } catch (const std::system_error& e) {
            can_grow = false;
            util::log_line(util::LogLevel::kInfo,
                           std::string("warm_up: a worker thread did not start: ") + e.what());
        }
    };
    std::unique_lock lock(mutex);
    for (unsigned n = 0; n < std::max(1u, first); ++n) grow();
    if (pool.empty()) {  // none started: made here after all
        lock.unlock();
        work();
        return;
    }
    while (!all_done.wait_for(lock, patience, [&] { return done == count; })) grow();
    lock.unlock();
    for (std::thread& thread : pool) thread.join();
}

// `make(k)` for every k below `count`, in order, on up to `threads` threads of its own, while the
// caller takes each as it comes: bundle k's lookup or link overlaps the loads of those before it
// (and a remote tier's round trips overlap each other). Without `caller_helps` (links: long
// items), each new thread starts the next. With it (short items: lookups), the caller makes an
// item that no thread has begun (the first, while the first thread starts) rather than wait for
// it, and another thread starts only when the caller finds the threads behind (an item after the
// first not begun, or begun and not done): one thread keeps ahead of loads from a disk, and a
// slow tier's round trips get as many as they need.
template <class T>
class Ahead {
public:
    Ahead(std::size_t count, std::size_t threads, bool caller_helps,
          std::function<T(std::size_t)> make)
        : count_(count),
          most_(std::min(threads, count)),
          caller_helps_(caller_helps),
          make_(std::move(make)),
          made_(count),
          done_(count, false) {
        pool_.reserve(most_);  // no allocation while threads run
        std::lock_guard lock(mutex_);
        start();
        alone_ = pool_.empty();
    }
    ~Ahead() {
        next_.store(count_);  // nothing more is taken
        std::unique_lock lock(mutex_);
        closed_ = true;  // no thread starts another from here on
        lock.unlock();
        for (std::thread& thread : pool_) thread.join();
    }
    Ahead(const Ahead&) = delete;
    Ahead& operator=(const Ahead&) = delete;

    T take(std::size_t k) {
        // Not begun by any thread (or none started): made here rather than waited for.
        if (std::size_t expected = k;
            (caller_helps_ || alone_) && next_.compare_exchange_strong(expected, k + 1)) {
            if (caller_helps_ && k > 0) {
                std::lock_guard lock(mutex_);
                start();
            }
            return make_(k);
        }
        std::unique_lock lock(mutex_);
        if (caller_helps_ && k > 0 && !done_[k]) start();
        made_done_.wait(lock, [&] { return static_cast<bool>(done_[k]); });
        return std::move(made_[k]);
    }

private:
    // One more thread, if the most have not started and items are left. Requires mutex_.
    void start() {
        if (closed_ || pool_.size() >= most_ || next_.load() >= count_) return;
        try {
            pool_.emplace_back([this] {
                if (!caller_helps_) {
                    std::lock_guard lock(mutex_);
                    start();
                }
                work();
            });
        } catch (const std::system_error& e) {
            closed_ = true;
            util::log_line(util::LogLevel::kInfo,
                           std::string("warm_up: a bundle thread did not start: ") + e.what());
        }
    }

    void work() {
        for (std::size_t k = next_.fetch_add(1); k < count_; k = next_.fetch_add(1)) {
            T made = make_(k);
            std::lock_guard lock(mutex_);
            made_[k] = std::move(made);
            done_[k] = true;
            made_done_.notify_all();
        }
    }

    const std::size_t count_, most_;
    const bool caller_helps_;
    bool alone_ = false;  // no thread started: the caller makes every item (set once, at first)
    const std::function<T(std::size_t)> make_;
    std::atomic<std::size_t> next_{0};
    std::mutex mutex_;
    std::condition_variable made_done_;
    std::vector<T> made_;            // guarded by mutex_
    std::vector<bool> done_;         // guarded by mutex_
    bool closed_ = false;            // guarded by mutex_
    std::vector<std::thread> pool_;  // grown under mutex_; joined by the destructor once closed
};

}  // namespace kcache::cache
