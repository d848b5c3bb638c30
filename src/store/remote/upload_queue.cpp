// SPDX-License-Identifier: Apache-2.0
#include "store/remote/upload_queue.hpp"

#include <utility>

namespace kcache::store::remote {

UploadQueue::UploadQueue(Send send, std::size_t max_entries, std::uint64_t max_bytes)
    : send_(std::move(send)),
      max_entries_(max_entries),
      max_bytes_(max_bytes),
      thread_([this] { run(); }) {}

UploadQueue::~UploadQueue() {
    finish(std::chrono::milliseconds{0});
}

bool UploadQueue::push(Upload upload) {
    {
        std::lock_guard lock(mutex_);
        const bool fits =
            queue_.size() < max_entries_ && bytes_ + upload.entry.size() <= max_bytes_;
        if (!stopping_ && fits) {
            bytes_ += upload.entry.size();
            queue_.push_back(std::move(upload));
            changed_.notify_all();
            return true;
        }
    }
    if (upload.then) upload.then(false);
    return false;
}

void UploadQueue::run() {
    std::unique_lock lock(mutex_);
    for (;;) {
        changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, and nothing left to send
        Upload upload = std::move(queue_.front());
        queue_.pop_front();
        bytes_ -= upload.entry.size();
        sending_ = true;
        lock.unlock();
        const bool there = send_(upload);
        if (upload.then) upload.then(there);
        lock.lock();
        sending_ = false;
        changed_.notify_all();
    }
}

void UploadQueue::drain() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return queue_.empty() && !sending_; });
}

std::size_t UploadQueue::finish(std::chrono::milliseconds grace) {
    std::deque<Upload> dropped;
    {
        std::unique_lock lock(mutex_);
        changed_.wait_for(lock, grace, [&] { return queue_.empty() && !sending_; });
        stopping_ = true;
        dropped.swap(queue_);
        bytes_ = 0;
        changed_.notify_all();
    }
    if (thread_.joinable()) thread_.join();
    for (Upload& upload : dropped) {
        if (upload.then) upload.then(false);
    }
    return dropped.size();
}

}  // namespace kcache::store::remote
