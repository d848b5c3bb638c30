// SPDX-License-Identifier: Apache-2.0
#include "store/remote/upload_queue.hpp"

#include <unistd.h>

#include <utility>

namespace kcache::store::remote {

UploadQueue::UploadQueue(Send send, std::size_t max_entries, std::uint64_t max_bytes)
    : owner_(getpid()),
      send_(std::move(send)),
      max_entries_(max_entries),
      max_bytes_(max_bytes),
      state_(std::make_unique<State>()),
      thread_([this] { run(); }) {}

UploadQueue::~UploadQueue() {
    finish(std::chrono::milliseconds{0});
    if (forked()) {
        // The parent's thread may be inside the state, and a std::thread that is not joined ends
        // the process when destroyed: both are left as they are.
        (void)state_.release();
        new std::thread(std::move(thread_));
    }
}

bool UploadQueue::forked() const noexcept {
    return getpid() != owner_;
}

bool UploadQueue::push(Upload upload) {
    if (!forked()) {
        State& s = *state_;
        std::lock_guard lock(s.mutex);
        const bool fits =
            s.queue.size() < max_entries_ && s.bytes + upload.entry.size() <= max_bytes_;
        if (!s.stopping && fits) {
            s.bytes += upload.entry.size();
            s.queue.push_back(std::move(upload));
            s.changed.notify_all();
            return true;
        }
    }
    if (upload.then) upload.then(false);
    return false;
}

void UploadQueue::run() {
    State& s = *state_;
    std::unique_lock lock(s.mutex);
    for (;;) {
        s.changed.wait(lock, [&] { return s.stopping || !s.queue.empty(); });
        if (s.queue.empty()) return;  // stopping, and nothing left to send
        Upload upload = std::move(s.queue.front());
        s.queue.pop_front();
        s.bytes -= upload.entry.size();
        s.sending = true;
        lock.unlock();
        const bool there = send_(upload);
        if (upload.then) upload.then(there);
        lock.lock();
        s.sending = false;
        s.changed.notify_all();
    }
}

void UploadQueue::drain() {
    if (forked()) return;
    State& s = *state_;
    std::unique_lock lock(s.mutex);
    s.changed.wait(lock, [&] { return s.queue.empty() && !s.sending; });
}

std::size_t UploadQueue::finish(std::chrono::milliseconds grace) {
    if (forked()) return 0;
    State& s = *state_;
    std::deque<Upload> dropped;
    {
        std::unique_lock lock(s.mutex);
        s.changed.wait_for(lock, grace, [&] { return s.queue.empty() && !s.sending; });
        s.stopping = true;
        dropped.swap(s.queue);
        s.bytes = 0;
        s.changed.notify_all();
    }
    if (thread_.joinable()) thread_.join();
    for (Upload& upload : dropped) {
        if (upload.then) upload.then(false);
    }
    return dropped.size();
}

}  // namespace kcache::store::remote
