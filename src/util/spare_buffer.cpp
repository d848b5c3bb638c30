#include "util/spare_buffer.hpp"

#include <new>
#include <utility>

namespace kcache::util {
namespace {

constexpr std::size_t kLargestKept = std::size_t{4} << 20;

// Plain pointers and flags stay readable for the thread's whole life, after thread-local
// destructors ran too (a cache destroyed late may still give a buffer back then).
thread_local std::string* t_spare = nullptr;
thread_local bool t_closed = false;

struct Closer {
    Closer() = default;
    Closer(const Closer&) = delete;
    Closer& operator=(const Closer&) = delete;
    ~Closer() {
        delete t_spare;
        t_spare = nullptr;
        t_closed = true;
    }
};

}  // namespace

std::string take_buffer(std::size_t size) {
    if (t_spare != nullptr && t_spare->capacity() >= size) {
        std::string buffer = std::move(*t_spare);
        t_spare->clear();
        buffer.resize(size);
        return buffer;
    }
    return std::string(size, '\0');
}

void give_back_buffer(std::string&& buffer) noexcept {
    if (t_closed || buffer.capacity() > kLargestKept) return;
    if (t_spare == nullptr) {
        thread_local Closer closer;  // frees the spare at thread exit; made with the first one
        (void)closer;
        t_spare = new (std::nothrow) std::string();
        if (t_spare == nullptr) return;
    }
    if (buffer.capacity() > t_spare->capacity()) *t_spare = std::move(buffer);
}

}  // namespace kcache::util
