// SPDX-License-Identifier: Apache-2.0
// The disk tier's writes of freshly compiled entries, off the compiling thread's path: a durable
// write (temporary file, fsync, rename) costs milliseconds, and the caller needs only the cubin,
// which the memory tier already holds. Each write's `then` runs once the write ended, on the
// writing thread: the compile's lock file is released there, so that other processes waiting for
// it find the entry on disk. A few threads write at once (a durable write waits on the disk, not
// the CPU); they start as writes come. Bounded in entries and bytes: a write that does not fit is
// refused, and its caller writes it itself, so nothing is ever dropped for want of room.
// A forked child has none of its parent's threads, and perhaps a mutex a parent thread held: in
// it the queue refuses every write, and its end waits for nothing and touches nothing of the
// parent's (the parent makes its own writes, and releases its own locks).
#pragma once

#include <sys/types.h>

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
    // in a forked child, or no thread could be started for it.
    bool push(DiskWrite& write);
    // Waits until everything queued so far was written.
    void drain();
    // Waits up to `bound` for the queue to be written, then stops the threads; what was still
    // queued then is not written, and its `then` is told so. Later pushes are refused. Returns
    // how many were not written.
    std::size_t finish(std::chrono::milliseconds bound);

private:
    // Everything the threads share, on the heap: a forked child leaves it, never destroyed.
    struct State {
        std::mutex mutex;
        std::condition_variable changed;
        std::deque<DiskWrite> queue;  // guarded by mutex
        std::uint64_t bytes = 0;      // guarded by mutex: of the entries queued
        unsigned writing = 0;         // guarded by mutex: taken from the queue, not yet written
        unsigned idle = 0;            // guarded by mutex: threads waiting for a write
        bool stopping = false;        // guarded by mutex
        std::vector<std::thread> threads;  // guarded by mutex (started by push)
    };

    void run();
    bool forked() const noexcept;

    const pid_t owner_;  // the process whose threads these are
    const Write write_;
    const unsigned max_threads_;
    const std::size_t max_entries_;
    const std::uint64_t max_bytes_;
    std::unique_ptr<State> state_;  // released, not destroyed, at a forked child's end
};

}  // namespace kcache::store
