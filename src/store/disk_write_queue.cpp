// SPDX-License-Identifier: Apache-2.0
#include "store/disk_write_queue.hpp"

#include <system_error>
#include <utility>

#include "util/log.hpp"

namespace kcache::store {

DiskWriteQueue::DiskWriteQueue(Write write, unsigned max_threads, std::size_t max_entries,
                               std::uint64_t max_bytes)
    : write_(std::move(write)),
      max_threads_(max_threads == 0 ? 1 : max_threads),
      max_entries_(max_entries),
      max_bytes_(max_bytes) {}

DiskWriteQueue::~DiskWriteQueue() {
    finish(std::chrono::milliseconds::max());
}

bool DiskWriteQueue::push(DiskWrite& write) {
    const std::uint64_t size = write.entry->encoded().size();
    std::lock_guard lock(mutex_);
    const bool fits = queue_.size() < max_entries_ && bytes_ + size <= max_bytes_;
    if (stopping_ || !fits) return false;
    // One more thread while every thread is busy: a durable write waits on the disk, and the
    // writes of a warm-up's compiles come faster than one thread finishes them.
    if (idle_ <= queue_.size() && threads_.size() < max_threads_) {
        try {
            threads_.emplace_back([this] { run(); });
        } catch (const std::system_error& e) {
            util::log_line(util::LogLevel::kInfo,
                           std::string("disk writes: a thread did not start: ") + e.what());
            if (threads_.empty()) return false;  // no thread would ever write it
        }
    }
    bytes_ += size;
    queue_.push_back(std::move(write));
    changed_.notify_one();
    return true;
}

void DiskWriteQueue::run() {
    std::unique_lock lock(mutex_);
    for (;;) {
        ++idle_;
        changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        --idle_;
        if (queue_.empty()) return;  // stopping, and nothing left to write
        DiskWrite write = std::move(queue_.front());
        queue_.pop_front();
        bytes_ -= write.entry->encoded().size();
        ++writing_;
        lock.unlock();
        const Result<void> written = write_(write);
        if (write.then) write.then(written);
        write = {};  // the entry's bytes go before the queue says it is written
        lock.lock();
        --writing_;
        changed_.notify_all();
    }
}

void DiskWriteQueue::drain() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return queue_.empty() && writing_ == 0; });
}

std::size_t DiskWriteQueue::finish(std::chrono::milliseconds bound) {
    std::deque<DiskWrite> unwritten;
    std::vector<std::thread> threads;
    {
        std::unique_lock lock(mutex_);
        auto written = [&] { return queue_.empty() && writing_ == 0; };
        if (bound == std::chrono::milliseconds::max()) {
            changed_.wait(lock, written);
        } else {
            changed_.wait_for(lock, bound, written);
        }
        stopping_ = true;
        unwritten.swap(queue_);
        bytes_ = 0;
        threads.swap(threads_);
        changed_.notify_all();
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
