// SPDX-License-Identifier: Apache-2.0
// Epoch-based reclamation: lets the cache's readers walk shared structures with no lock, while
// writers defer freeing what they unlinked until no reader can still be looking at it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

namespace kcache::util {

// A thread's place in the domain. In the header so that pinning, on every cache hit, is inline.
struct alignas(64) ThreadRecord {
    // 0 while the thread is outside every read section; otherwise the epoch it pinned.
    std::atomic<std::uint64_t> epoch{0};
    std::atomic<bool> in_use{true};
    ThreadRecord* next = nullptr;   // immutable once the record is published
    std::uint32_t nesting = 0;      // touched by the owning thread only
    std::uint32_t fenced_pins = 0;  // touched by the owning thread only: pins made with a fence
    // Claimed by a thread whose thread_locals are already destroyed (a handle released from a
    // static or thread_local destructor): given back when its pin ends.
    bool temporary = false;
};

namespace detail {
// The calling thread's record, or null before its first pin. A plain pointer, constinit: reading
// it costs no TLS wrapper call.
extern constinit thread_local ThreadRecord* t_record;
}  // namespace detail

// Scheme (the classic three-epoch EBR):
//  - A reader pins: it publishes the global epoch it saw in its own thread record, ordered before
//    every load of shared data it then makes. Unpinning is a release store of 0. No reader ever
//    writes a line another reader writes.
//  - That ordering is asymmetric where Linux allows (membarrier PRIVATE_EXPEDITED, as userspace
//    RCU does): the reader's side is a compiler barrier only, and the rare writer that advances
//    the epoch makes every running thread of the process execute a full barrier first. Where
//    membarrier is missing (old kernels, some sandboxes) or KCACHE_EPOCH_FENCES=1, the reader
//    issues a seq_cst fence instead. Once the hit path lost its other locked instructions, the
//    fence was a large part of what was left (docs/performance.md).
//  - Registering for membarrier waits for an RCU grace period in a process that has threads (a
//    CUDA context starts some): several milliseconds, which a new process's first kernel must not
//    pay. So readers start with fences, and a thread that has pinned kPinsBeforeRegistering times
//    has a background thread register; the switch is made under the writers' mutex (see
//    register_membarrier_now()), so that no writer that chose the plain fence is still advancing
//    when a reader first skips its own.
//  - A writer unlinks an object, then retires it tagged with the current global epoch.
//  - The epoch advances from E to E+1 only when every pinned reader has published E. An object
//    retired at E is freed once the epoch reaches E+2: every reader that could have seen it was
//    pinned at E-1 or E, and both have since unpinned.
class EpochDomain {
public:
    class Guard {
    public:
        explicit Guard(EpochDomain& domain) noexcept
            : record_(detail::t_record != nullptr ? detail::t_record : domain.my_record()) {
            if (record_->nesting++ == 0) {
                // Acquire: everything unlinked before the epoch we see began is invisible to us.
                record_->epoch.store(domain.epoch_.load(std::memory_order_acquire),
                                     std::memory_order_relaxed);
                // Orders the publication above before this reader's loads of shared pointers;
                // pairs with heavy_barrier() in try_advance().
                // Acquire: reading true orders this reader's loads after every writer that still
                // chose the plain fence (they end before the flag is set; see
                // register_membarrier_now()). Free on x86, far cheaper than a fence elsewhere.
                if (domain.asymmetric_.load(std::memory_order_acquire)) {
                    std::atomic_signal_fence(std::memory_order_seq_cst);
                } else {
                    std::atomic_thread_fence(std::memory_order_seq_cst);
                    // Every kPinsBeforeRegistering fenced pins, not once: a registration whose
                    // thread did not start, or that a fork cut short, is asked for again.
                    if ((++record_->fenced_pins & (kPinsBeforeRegistering - 1)) == 0) {
                        domain.register_in_background();
                    }
                }
            }
        }
        ~Guard() {
            if (--record_->nesting == 0) {
                record_->epoch.store(0, std::memory_order_release);
                if (record_->temporary) give_back(record_);
            }
        }
        Guard(const Guard&) = delete;
        Guard& operator=(const Guard&) = delete;

    private:
        static void give_back(ThreadRecord* record) noexcept;
        ThreadRecord* record_;
    };

    // The process-wide domain. Never destroyed: readers may run during static destruction.
    static EpochDomain& global() {
        static EpochDomain* const domain = new EpochDomain();  // leaked on purpose
        return *domain;
    }

    Guard pin() noexcept { return Guard(*this); }

    // Runs `deleter` once no reader pinned now can still hold what it frees: collects at once,
    // unless a Batch is open on this thread.
    void retire(std::function<void()> deleter);

    // While one lives on a thread, that thread's retirements only queue, and its end collects
    // once. For a writer that retires many objects at once (a cache's end, an eviction): each
    // collect asks for two heavy barriers (a membarrier system call each), so retiring N objects
    // one collect each cost 2N of them. Nests; the outermost end collects.
    class Batch {
    public:
        explicit Batch(EpochDomain& domain) noexcept;
        ~Batch();
        Batch(const Batch&) = delete;
        Batch& operator=(const Batch&) = delete;

    private:
        EpochDomain& domain_;
    };

    // Advances the epoch where readers allow and runs the deleters that became safe.
    void collect();

    // Collects until nothing retired before this call is pending, yielding while readers stay
    // pinned. For tests and shutdown; never call it while pinned (it would wait for itself).
    void synchronize();

    std::size_t pending() const;

    // True when readers rely on membarrier rather than their own fences (see the scheme above:
    // not before a thread has pinned kPinsBeforeRegistering times, or register_membarrier_now()).
    bool asymmetric() const noexcept { return asymmetric_.load(std::memory_order_acquire); }

    // Registers for membarrier on the calling thread (several milliseconds where the process has
    // threads) and, if that worked, lets readers skip their fence from now on. Idempotent. False
    // when membarrier is missing or KCACHE_EPOCH_FENCES=1: readers keep their fences. For a
    // program that wants the switch before it starts timing; the cache never needs to call it.
    bool register_membarrier_now() noexcept;

    // A reader's pins made with a fence before its thread asks for membarrier in the background
    // (and again after as many more, while readers still fence). A power of two.
    static constexpr std::uint32_t kPinsBeforeRegistering = 1024;
    static_assert((kPinsBeforeRegistering & (kPinsBeforeRegistering - 1)) == 0);

    EpochDomain(const EpochDomain&) = delete;
    EpochDomain& operator=(const EpochDomain&) = delete;

private:
    EpochDomain();
    // Orders every reader's pin before what the caller reads next; false if it could not.
    // Requires mutex_.
    bool heavy_barrier() const noexcept;
    // Starts register_membarrier_now() on a thread of its own unless one was started (in this
    // process: a forked child may start its own); nothing if none starts.
    void register_in_background() noexcept;
    friend class Guard;
    ThreadRecord* my_record();
    bool try_advance();  // requires mutex_

    struct Retired {
        std::uint64_t epoch;
        std::function<void()> deleter;
    };

    const bool membarrier_wanted_;  // KCACHE_EPOCH_FENCES is not 1
    std::atomic<bool> registration_started_{false};
    std::atomic<bool> asymmetric_{false};  // readers skip their fence; set after registered_
    bool registered_ = false;              // guarded by mutex_: writers use membarrier
    std::atomic<std::uint64_t> epoch_{1};
    std::atomic<ThreadRecord*> records_{nullptr};  // push-only list, records are reused
    mutable std::mutex mutex_;                     // guards retired_ and registered_
    std::vector<Retired> retired_;
};

}  // namespace kcache::util
