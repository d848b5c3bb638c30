// SPDX-License-Identifier: Apache-2.0
#include "util/epoch.hpp"

#include <linux/membarrier.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <thread>

#include "util/striped_counter.hpp"

namespace kcache::util {

static_assert(alignof(ThreadRecord) == kCacheLine);

namespace detail {
constinit thread_local ThreadRecord* t_record = nullptr;
}  // namespace detail

using detail::t_record;

namespace {

// RecordLease gives the calling thread's record (detail::t_record) back when the thread ends.
// Set once this thread's RecordLease is destroyed; trivially destructible, so still readable.
thread_local bool t_exiting = false;

// How many EpochDomain::Batch are open on this thread.
constinit thread_local int t_batches = 0;

// Gives the record back when its thread ends; the record stays in the list for reuse.
struct RecordLease {
    ThreadRecord* record = nullptr;
    ~RecordLease() {
        t_exiting = true;
        t_record = nullptr;
        if (record != nullptr) {
            record->epoch.store(0, std::memory_order_release);
            record->in_use.store(false, std::memory_order_release);
        }
    }
};

}  // namespace

namespace {

long membarrier(int command) {
    return syscall(__NR_membarrier, command, 0, 0);
}

bool fences_forced() {
    const char* value = std::getenv("KCACHE_EPOCH_FENCES");
    return value != nullptr && std::strcmp(value, "1") == 0;
}

bool register_membarrier() {
    const long supported = membarrier(MEMBARRIER_CMD_QUERY);
    if (supported < 0 || (supported & MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return false;
    return membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
}

}  // namespace

EpochDomain::EpochDomain() : membarrier_wanted_(!fences_forced()) {
    // A fork while another thread holds mutex_ (a writer, or the switch below) would leave the
    // child's copy locked for ever; and a child forked while the switch was under way has no
    // thread finishing it, so its readers may ask again.
    pthread_atfork([] { global().mutex_.lock(); }, [] { global().mutex_.unlock(); },
                   [] {
                       EpochDomain& self = global();
                       if (!self.asymmetric_.load(std::memory_order_relaxed)) {
                           self.registration_started_.store(false, std::memory_order_relaxed);
                       }
                       self.mutex_.unlock();
                   });
}

bool EpochDomain::register_membarrier_now() noexcept {
    if (!membarrier_wanted_) return false;
    if (asymmetric_.load(std::memory_order_acquire)) return true;
    // The slow part, outside the lock: readers and writers go on with fences meanwhile.
    if (!register_membarrier()) return false;
    {
        // Writers choose their barrier under mutex_: once this is set, every later advance uses
        // membarrier, and none that chose the fence is still running.
        std::lock_guard lock(mutex_);
        registered_ = true;
    }
    asymmetric_.store(true, std::memory_order_release);
    return true;
}

void EpochDomain::register_in_background() noexcept {
    if (!membarrier_wanted_ || registration_started_.exchange(true)) return;
    try {
        // The domain is never destroyed, so the thread may outlive everything else.
        std::thread([this] { register_membarrier_now(); }).detach();
    } catch (...) {  // std::system_error, std::bad_alloc: never out of a reader's pin
        registration_started_.store(false);  // no thread now: another reader's count may retry
    }
}

bool EpochDomain::heavy_barrier() const noexcept {
    if (!registered_) {
        std::atomic_thread_fence(std::memory_order_seq_cst);
        return true;
    }
    // Not expected to fail once registered; if it does, the epoch simply does not advance (freeing
    // is postponed), since readers pinned without a fence are only safe behind the barrier.
    return membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0;
}

ThreadRecord* EpochDomain::my_record() {
    // There is one domain per process (global()), so one thread_local slot suffices.
    if (t_record != nullptr) return t_record;

    ThreadRecord* found = nullptr;
    for (ThreadRecord* r = records_.load(std::memory_order_acquire); r != nullptr; r = r->next) {
        bool expected = false;
        if (r->in_use.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) {
            found = r;
            break;
        }
    }
    if (found == nullptr) {
        found = new ThreadRecord();  // lives as long as the domain: records are reused
        ThreadRecord* head = records_.load(std::memory_order_relaxed);
        do {
            found->next = head;
        } while (!records_.compare_exchange_weak(head, found, std::memory_order_release,
                                                 std::memory_order_relaxed));
    }
    if (t_exiting) {
        found->temporary = true;  // the lease is gone: the Guard gives the record back
        return found;
    }
    thread_local RecordLease lease;
    lease.record = found;
    t_record = found;
    return found;
}

void EpochDomain::Guard::give_back(ThreadRecord* record) noexcept {
    record->temporary = false;
    record->in_use.store(false, std::memory_order_release);
}

bool EpochDomain::try_advance() {
    const std::uint64_t current = epoch_.load(std::memory_order_relaxed);
    if (!heavy_barrier()) return false;
    for (ThreadRecord* r = records_.load(std::memory_order_acquire); r != nullptr; r = r->next) {
        const std::uint64_t seen = r->epoch.load(std::memory_order_acquire);
        if (seen != 0 && seen != current) return false;
    }
    epoch_.store(current + 1, std::memory_order_release);
    return true;
}

void EpochDomain::retire(std::function<void()> deleter) {
    // Orders the caller's unlink before the epoch read below: otherwise (on weakly ordered
    // machines) the tag could be older than a reader that still sees the unlinked object.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    {
        std::lock_guard lock(mutex_);
        retired_.push_back({epoch_.load(std::memory_order_relaxed), std::move(deleter)});
    }
    if (t_batches == 0) collect();
}

EpochDomain::Batch::Batch(EpochDomain& domain) noexcept : domain_(domain) {
    ++t_batches;
}

EpochDomain::Batch::~Batch() {
    if (--t_batches != 0) return;
    try {
        domain_.collect();
    } catch (...) {  // no memory: what is queued stays for the next collect
    }
}

void EpochDomain::collect() {
    std::vector<Retired> ready;
    {
        std::lock_guard lock(mutex_);
        if (retired_.empty()) return;
        // Reserved first: the moves below cannot throw, so retired_ is never left with
        // moved-from deleters in it.
        ready.reserve(retired_.size());
        try_advance();
        try_advance();
        const std::uint64_t now = epoch_.load(std::memory_order_relaxed);
        auto keep = retired_.begin();
        for (auto it = retired_.begin(); it != retired_.end(); ++it) {
            if (it->epoch + 2 <= now) {
                ready.push_back(std::move(*it));
            } else {
                if (keep != it) *keep = std::move(*it);
                ++keep;
            }
        }
        retired_.erase(keep, retired_.end());
    }
    // Deleters run outside the lock: they may unload CUDA libraries or retire more objects.
    for (auto& item : ready) item.deleter();
}

void EpochDomain::synchronize() {
    while (pending() > 0) {
        collect();
        if (pending() > 0) std::this_thread::yield();
    }
}

std::size_t EpochDomain::pending() const {
    std::lock_guard lock(mutex_);
    return retired_.size();
}

}  // namespace kcache::util
