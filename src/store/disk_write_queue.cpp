// SPDX-License-Identifier: Apache-2.0
#include "store/disk_write_queue.hpp"

#include <utility>

namespace kcache::store {

DiskWriteQueue::DiskWriteQueue(Write write, unsigned max_threads, std::size_t max_entries,
                               std::uint64_t max_bytes)
    : queue_(
          [write = std::move(write)](DiskWrite& item) {
              const Result<void> written = write(item);
              if (item.then) item.then(written);
          },
          [](const DiskWrite& item) -> std::uint64_t { return item.entry->encoded().size(); },
          max_threads, max_entries, max_bytes) {}

DiskWriteQueue::~DiskWriteQueue() {
    finish(std::chrono::milliseconds::max());
}

std::size_t DiskWriteQueue::finish(std::chrono::milliseconds bound) {
    auto unwritten = queue_.finish(bound);
    const Result<void> not_written =
        Error(Errc::kIoError, "not written: the cache ended before its disk write");
    for (DiskWrite& write : unwritten) {
        if (write.then) write.then(not_written);
    }
    return unwritten.size();
}

}  // namespace kcache::store
