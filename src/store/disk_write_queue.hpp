// SPDX-License-Identifier: Apache-2.0
// The disk tier's writes of freshly compiled entries, off the compiling thread's path: a durable
// write (temporary file, fsync, rename) costs milliseconds, and the caller needs only the cubin,
// which the memory tier already holds. Each write's `then` runs once the write ended, on the
// writing thread: the compile's lock file is released there, so that other processes waiting for
// it find the entry on disk. A few threads write at once (a durable write waits on the disk, not
// the CPU). A write that does not fit is refused, and its caller writes it itself, so nothing is
// ever dropped for want of room; in a forked child every write is refused (util/work_queue.hpp).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "kcache/result.hpp"
#include "store/artifact_format.hpp"
#include "util/fingerprint.hpp"
#include "util/work_queue.hpp"

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
    bool push(DiskWrite& write) { return queue_.push(write); }
    // Waits until everything queued so far was written.
    void drain() { queue_.drain(); }
    // Waits up to `bound` for the queue to be written, then stops the threads; what was still
    // queued then is not written, and its `then` is told so. Later pushes are refused. Returns
    // how many were not written.
    std::size_t finish(std::chrono::milliseconds bound);

private:
    util::WorkQueue<DiskWrite> queue_;
};

}  // namespace kcache::store
