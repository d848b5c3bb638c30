// SPDX-License-Identifier: Apache-2.0
// The remote tier's writes, off the caller's path: a compile returns its kernel first, and one
// background thread sends what it queued. Bounded in entries and bytes: what does not fit is
// dropped and counted, never waited for. At the end a short grace period lets the queue drain;
// what is left then is dropped, so a process never hangs on a slow or dead server at exit. In a
// forked child the queue refuses uploads and its end waits for nothing (util/work_queue.hpp).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "util/fingerprint.hpp"
#include "util/work_queue.hpp"

namespace kcache::store::remote {

struct Upload {
    util::Fingerprint fingerprint;
    std::string entry;  // the disk entry's bytes
    // A disk hit shared again (`reshare`): only to backends that ask for it, and only where the
    // value is missing.
    bool reshare = false;
    // Runs after the upload was sent (or dropped), told whether the value is now there to be
    // found: a lease is released only then, so that nodes waiting on it do not compile it
    // themselves, and says whether they will find it.
    std::function<void(bool there)> then;
};

class UploadQueue {
public:
    // True when the value is now stored (or was there already).
    using Send = std::function<bool(const Upload&)>;

    UploadQueue(Send send, std::size_t max_entries, std::uint64_t max_bytes);
    // finish() with no grace: what is queued is dropped.
    ~UploadQueue();
    UploadQueue(const UploadQueue&) = delete;
    UploadQueue& operator=(const UploadQueue&) = delete;

    // False (and `upload.then` run at once) when the queue is full or finished, or in a forked
    // child.
    bool push(Upload upload);
    // Waits up to `grace` for the queue to drain, then drops the rest and stops the thread. The
    // upload being sent when the grace runs out still finishes (its request has its own deadline).
    // Returns how many were dropped. Later pushes are refused.
    std::size_t finish(std::chrono::milliseconds grace);
    // Waits, without finishing, until everything queued so far was sent (tests, `kcache push`).
    void drain();

private:
    util::WorkQueue<Upload> queue_;
};

}  // namespace kcache::store::remote
