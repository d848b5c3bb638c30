#include "util/spare_buffer.hpp"

#include <utility>

namespace kcache::util {
namespace {

// Trivially destructible, so that it may be reached while the thread's other thread_local objects
// are being destroyed (an entry dropped by a static's destructor, say): `gone` then says the
// spare has been freed and must not come back.
struct Slot {
    std::string* spare = nullptr;
    bool gone = false;
};
thread_local Slot slot;

// Frees the spare as the thread ends.
struct SlotOwner {
    ~SlotOwner() {
        delete slot.spare;
        slot.spare = nullptr;
        slot.gone = true;
    }
};
thread_local SlotOwner owner;

}  // namespace

std::string take_spare_buffer() {
    if (slot.spare == nullptr) return {};
    std::string bytes = std::move(*slot.spare);
    delete slot.spare;
    slot.spare = nullptr;
    bytes.clear();
    return bytes;
}

void give_spare_buffer(std::string&& bytes) noexcept {
    if (slot.gone || slot.spare != nullptr || bytes.capacity() > kSpareBufferLimit) return;
    // A short string's storage is inside the object itself: nothing worth keeping.
    if (bytes.capacity() < 256) return;
    try {
        (void)&owner;  // constructs the owner on this thread, so the spare is freed at its exit
        slot.spare = new std::string(std::move(bytes));
    } catch (...) {  // no memory for the holder: the bytes are simply freed
    }
}

}  // namespace kcache::util
