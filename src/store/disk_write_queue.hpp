// SPDX-License-Identifier: Apache-2.0
// The disk tier's writes of freshly compiled entries, off the compiling thread's path: a durable
// write (temporary file, fsync, rename) costs milliseconds, and the caller needs only the cubin,
// which the memory tier already holds. Each write's `then` runs once the write ended, on the
// writing thread: the compile's lock file is released there, so that other processes waiting for
// it find the entry on disk. A few threads write at once (a durable write waits on the disk, not
// the CPU); they start as writes come. Bounded in entries and bytes: a write that does not fit is
// refused, and its caller writes it itself, so nothing is ever dropped for want of room.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "kcache/result.hpp"
#include "store/artifact_format.hpp"
#include "util/fingerprint.hpp"

namespace kcache::store {

struct DiskWrite {
    util::Fingerprint fingerprint;
    std::shared_ptr<const VerifiedArtifact> entry;  // never null; its encoded() bytes are written
    std::function<void(const Result<void>& written)> then;  // may be empty
};

class DiskWriteQueue {
public:
    using Write = std::function<Result<void>(const DiskWrite&)>;

    DiskWriteQueue(Write write, unsigned max_threads, std::size_t max_entries,
                   std::uint64_t max_bytes);
    // finish() with no bound.
    ~DiskWriteQueue();
    DiskWriteQueue(const DiskWriteQueue&) = delete;
    DiskWriteQueue& operator=(const DiskWriteQueue&) = delete;

    // False, leaving `write` untouched for its caller to write, when the queue is full, finished,
    // or no thread could be started for it.
    bool push(DiskWrite& write);
    // Waits until everything queued so far was written.
    void drain();
    // Waits up to `bound` for the queue to be written, then stops the threads; what was still
    // queued then is not written, and its `then` is told so. Later pushes are refused. Returns
    // how many were not written.
    std::size_t finish(std::chrono::milliseconds bound);

private:
    void run();

    Write write_;
    const unsigned max_threads_;
    const std::size_t max_entries_;
    const std::uint64_t max_bytes_;
    std::mutex mutex_;
    std::condition_variable changed_;
    std::deque<DiskWrite> queue_;       // guarded by mutex_
    std::uint64_t bytes_ = 0;           // guarded by mutex_: of the entries queued
    unsigned writing_ = 0;              // guarded by mutex_: taken from the queue, not yet written
    unsigned idle_ = 0;                 // guarded by mutex_: threads waiting for a write
    bool stopping_ = false;             // guarded by mutex_
    std::vector<std::thread> threads_;  // guarded by mutex_ (started by push)
};

}  // namespace kcache::store
