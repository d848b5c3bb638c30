// SPDX-License-Identifier: Apache-2.0
#include "store/disk_write_queue.hpp"

#include <unistd.h>

#include <system_error>
#include <utility>

#include "util/log.hpp"

namespace kcache::store {

DiskWriteQueue::DiskWriteQueue(Write write, unsigned max_threads, std::size_t max_entries,
                               std::uint64_t max_bytes)
    : owner_(getpid()),
      write_(std::move(write)),
      max_threads_(max_threads == 0 ? 1 : max_threads),
      max_entries_(max_entries),
      max_bytes_(max_bytes),
      state_(std::make_unique<State>()) {}

DiskWriteQueue::~DiskWriteQueue() {
    finish(std::chrono::milliseconds::max());
    if (forked()) (void)state_.release();  // the parent's threads may be inside it
}

bool DiskWriteQueue::forked() const noexcept {
    return getpid() != owner_;
}

bool DiskWriteQueue::push(DiskWrite& write) {
    if (forked()) return false;
    const std::uint64_t size = write.entry->encoded().size();
    State& s = *state_;
    std::lock_guard lock(s.mutex);
    const bool fits = s.queue.size() < max_entries_ && s.bytes + size <= max_bytes_;
    if (s.stopping || !fits) return false;
    // One more thread while every thread is busy: a durable write waits on the disk, and the
    // writes of a warm-up's compiles come faster than one thread finishes them.
    if (s.idle <= s.queue.size() && s.threads.size() < max_threads_) {
        try {
            s.threads.emplace_back([this] { run(); });
        } catch (const std::system_error& e) {
            util::log_line(util::LogLevel::kInfo,
                           std::string("disk writes: a thread did not start: ") + e.what());
            if (s.threads.empty()) return false;  // no thread would ever write it
        }
    }
    s.bytes += size;
    s.queue.push_back(std::move(write));
    s.changed.notify_one();
    return true;
}

void DiskWriteQueue::run() {
    State& s = *state_;
    std::unique_lock lock(s.mutex);
    for (;;) {
        ++s.idle;
        s.changed.wait(lock, [&] { return s.stopping || !s.queue.empty(); });
        --s.idle;
        if (s.queue.empty()) return;  // stopping, and nothing left to write
        DiskWrite write = std::move(s.queue.front());
        s.queue.pop_front();
        s.bytes -= write.entry->encoded().size();
        ++s.writing;
        lock.unlock();
        const Result<void> written = write_(write);
        if (write.then) write.then(written);
        write = {};  // the entry's bytes go before the queue says it is written
        lock.lock();
        --s.writing;
        s.changed.notify_all();
    }
}

void DiskWriteQueue::drain() {
    if (forked()) return;
    State& s = *state_;
    std::unique_lock lock(s.mutex);
    s.changed.wait(lock, [&] { return s.queue.empty() && s.writing == 0; });
}

std::size_t DiskWriteQueue::finish(std::chrono::milliseconds bound) {
    if (forked()) return 0;
    State& s = *state_;
    std::deque<DiskWrite> unwritten;
    std::vector<std::thread> threads;
    {
        std::unique_lock lock(s.mutex);
        auto written = [&] { return s.queue.empty() && s.writing == 0; };
        if (bound == std::chrono::milliseconds::max()) {
            s.changed.wait(lock, written);
        } else {
            s.changed.wait_for(lock, bound, written);
        }
        s.stopping = true;
        unwritten.swap(s.queue);
        s.bytes = 0;
        threads.swap(s.threads);
        s.changed.notify_all();
    }
    for (auto& thread : threads) thread.join();
    const Result<void> not_written =
        Error(Errc::kIoError, "not written: the cache ended before its disk write");
    for (DiskWrite& write : unwritten) {
        if (write.then) write.then(not_written);
    }
    return unwritten.size();
}

}  // namespace kcache::store
