// SPDX-License-Identifier: Apache-2.0
#include "util/spare_buffer.hpp"

#include <utility>

namespace kcache::util {
namespace {

// Trivially destructible, so that it may be reached while the thread's other thread_local objects
// are being destroyed (an entry dropped by a static's destructor, say): `gone` then says the
// holder has been freed and nothing may come back. The holder is made once per thread and kept.
struct Slot {
    std::string* holder = nullptr;
    bool full = false;  // the holder keeps a spare
    bool gone = false;
};
thread_local Slot slot;

// Frees the holder, and the spare in it, as the thread ends.
struct SlotOwner {
    ~SlotOwner() {
        delete slot.holder;
        slot.holder = nullptr;
        slot.full = false;
        slot.gone = true;
    }
};
thread_local SlotOwner owner;

}  // namespace

std::string take_spare_buffer() {
    if (!slot.full) return {};
    slot.full = false;
    std::string bytes = std::move(*slot.holder);
    bytes.clear();
    return bytes;
}

void give_spare_buffer(std::string&& bytes) noexcept {
    if (slot.gone || slot.full || bytes.capacity() > kSpareBufferLimit) return;
    // A short string's storage is inside the object itself: nothing worth keeping.
    if (bytes.capacity() < 256) return;
    if (slot.holder == nullptr) {
        try {
            (void)&owner;  // constructs the owner on this thread, so the holder is freed at its
                           // exit
            slot.holder = new std::string();
        } catch (...) {  // no memory for the holder: the bytes are simply freed
            return;
        }
    }
    *slot.holder = std::move(bytes);
    slot.full = true;
}

}  // namespace kcache::util
