// SPDX-License-Identifier: Apache-2.0
#include "util/thread_slot.hpp"

#include <functional>
#include <mutex>
#include <queue>
#include <vector>

namespace kcache::util {
namespace detail {

constinit thread_local std::uint32_t t_slot_plus_one = 0;

namespace {

// Set once this thread's lease is destroyed; trivially destructible, so still readable.
thread_local bool t_exiting = false;

struct SlotPool {
    std::mutex mutex;
    std::uint32_t next = 0;  // guarded by mutex
    // Given back, lowest first, so that the slots in use stay dense; guarded by mutex.
    std::priority_queue<std::uint32_t, std::vector<std::uint32_t>, std::greater<>> free;
};

SlotPool& pool() {
    static SlotPool* slots = new SlotPool();  // leaked: threads may end during static destruction
    return *slots;
}

// Gives the thread's slot back when the thread ends.
struct SlotLease {
    std::uint32_t slot = 0;
    bool held = false;
    ~SlotLease() {
        t_exiting = true;
        if (!held) return;
        t_slot_plus_one = 0;
        SlotPool& slots = pool();
        std::lock_guard lock(slots.mutex);
        slots.free.push(slot);
    }
};

}  // namespace

std::uint32_t claim_thread_slot() noexcept {
    SlotPool& slots = pool();
    std::uint32_t slot = 0;
    {
        std::lock_guard lock(slots.mutex);
        if (slots.free.empty()) {
            slot = slots.next++;
        } else {
            slot = slots.free.top();
            slots.free.pop();
        }
    }
    t_slot_plus_one = slot + 1;
    // A thread whose thread_locals are being destroyed cannot register a lease: it keeps the slot
    // (a leak of one number, for a thread that is ending anyway).
    if (t_exiting) return slot;
    thread_local SlotLease lease;
    lease.slot = slot;
    lease.held = true;
    return slot;
}

}  // namespace detail
}  // namespace kcache::util
