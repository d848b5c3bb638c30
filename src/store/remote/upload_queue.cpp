// SPDX-License-Identifier: Apache-2.0
#include "store/remote/upload_queue.hpp"

#include <utility>

namespace kcache::store::remote {

// One thread: uploads are sent in the order they were queued.
UploadQueue::UploadQueue(Send send, std::size_t max_entries, std::uint64_t max_bytes)
    : queue_(
          [send = std::move(send)](Upload& upload) {
              const bool there = send(upload);
              if (upload.then) upload.then(there);
          },
          [](const Upload& upload) -> std::uint64_t { return upload.entry.size(); }, 1, max_entries,
          max_bytes) {}

UploadQueue::~UploadQueue() {
    finish(std::chrono::milliseconds{0});
}

bool UploadQueue::push(Upload upload) {
    if (queue_.push(upload)) return true;
    if (upload.then) upload.then(false);
    return false;
}

void UploadQueue::drain() {
    queue_.drain();
}

std::size_t UploadQueue::finish(std::chrono::milliseconds grace) {
    auto dropped = queue_.finish(grace);
    for (Upload& upload : dropped) {
        if (upload.then) upload.then(false);
    }
    return dropped.size();
}

}  // namespace kcache::store::remote
