// SPDX-License-Identifier: Apache-2.0
// Work handed to background threads, off the caller's path: a queue bounded in entries and bytes,
// served by up to `max_threads` threads that start as work comes (one more whenever every thread
// is busy). What does not fit is refused and left to the caller, who decides whether to do it
// itself or drop it. At the end, finish() waits a bounded time and hands back what was not done.
//
// A forked child has none of its parent's threads, perhaps a mutex a parent thread held, and a
// condition variable that parent threads wait on (destroying it would wait for ever): in a child
// the queue refuses all work, waits for nothing, and its end leaves the parent's state as it is.
#pragma once

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace kcache::util {

template <class Item>
class WorkQueue {
public:
    using Process = std::function<void(Item&)>;
    using Size = std::function<std::uint64_t(const Item&)>;

    WorkQueue(Process process, Size size, unsigned max_threads, std::size_t max_entries,
              std::uint64_t max_bytes)
        : owner_(getpid()),
          process_(std::move(process)),
          size_(std::move(size)),
          max_threads_(max_threads == 0 ? 1 : max_threads),
          max_entries_(max_entries),
          max_bytes_(max_bytes),
          state_(std::make_unique<State>()) {}
    // finish() with no wait; what was queued is dropped without being processed.
    ~WorkQueue() {
        if (forked()) {
            (void)state_.release();  // the parent's threads may be inside it
            return;
        }
        finish(std::chrono::milliseconds{0});
    }
    WorkQueue(const WorkQueue&) = delete;
    WorkQueue& operator=(const WorkQueue&) = delete;

    // False, leaving `item` untouched, when the queue is full or finished, in a forked child, or
    // when no thread could be started to process it.
    bool push(Item& item) {
        if (forked()) return false;
        const std::uint64_t bytes = size_(item);
        State& s = *state_;
        std::lock_guard lock(s.mutex);
        const bool fits = s.queue.size() < max_entries_ && s.bytes + bytes <= max_bytes_;
        if (s.stopping || !fits) return false;
        if (s.idle <= s.queue.size() && s.threads.size() < max_threads_) {
            try {
                s.threads.emplace_back([this] { run(); });
            } catch (const std::system_error&) {
                if (s.threads.empty()) return false;  // no thread would ever process it
            }
        }
        s.bytes += bytes;
        s.queue.push_back(std::move(item));
        s.changed.notify_one();
        return true;
    }

    // Waits until everything queued so far was processed.
    void drain() {
        if (forked()) return;
        State& s = *state_;
        std::unique_lock lock(s.mutex);
        s.changed.wait(lock, [&] { return s.queue.empty() && s.busy == 0; });
    }

    // Waits up to `bound` (max(): without a bound) for the queue to be processed, then stops the
    // threads, letting the items under way finish. Returns what was still queued, unprocessed;
    // later pushes are refused. Nothing in a forked child.
    std::deque<Item> finish(std::chrono::milliseconds bound) {
        if (forked()) return {};
        State& s = *state_;
        std::deque<Item> left;
        std::vector<std::thread> threads;
        {
            std::unique_lock lock(s.mutex);
            auto done = [&] { return s.queue.empty() && s.busy == 0; };
            if (bound == std::chrono::milliseconds::max()) {
                s.changed.wait(lock, done);
            } else {
                s.changed.wait_for(lock, bound, done);
            }
            s.stopping = true;
            left.swap(s.queue);
            s.bytes = 0;
            threads.swap(s.threads);
            s.changed.notify_all();
        }
        for (auto& thread : threads) thread.join();
        return left;
    }

private:
    struct State {
        std::mutex mutex;
        std::condition_variable changed;
        std::deque<Item> queue;            // guarded by mutex
        std::uint64_t bytes = 0;           // guarded by mutex: of the items queued
        unsigned busy = 0;                 // guarded by mutex: taken from the queue, not yet done
        unsigned idle = 0;                 // guarded by mutex: threads waiting for an item
        bool stopping = false;             // guarded by mutex
        std::vector<std::thread> threads;  // guarded by mutex (started by push)
    };

    bool forked() const noexcept { return getpid() != owner_; }

    void run() {
        State& s = *state_;
        std::unique_lock lock(s.mutex);
        for (;;) {
            ++s.idle;
            s.changed.wait(lock, [&] { return s.stopping || !s.queue.empty(); });
            --s.idle;
            if (s.queue.empty()) return;  // stopping, and nothing left
            Item item = std::move(s.queue.front());
            s.queue.pop_front();
            s.bytes -= size_(item);
            ++s.busy;
            lock.unlock();
            process_(item);
            item = Item{};  // what it holds goes before the queue says it is done
            lock.lock();
            --s.busy;
            s.changed.notify_all();
        }
    }

    const pid_t owner_;  // the process whose threads these are
    const Process process_;
    const Size size_;
    const unsigned max_threads_;
    const std::size_t max_entries_;
    const std::uint64_t max_bytes_;
    std::unique_ptr<State> state_;  // released, not destroyed, at a forked child's end
};

}  // namespace kcache::util
