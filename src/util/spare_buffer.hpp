// One spare buffer per thread for files read whole: the bytes of a disk hit, let go once the
// driver has loaded them, are the buffer the next hit reads into. In a new process, where every
// kernel is a disk hit, a fresh buffer per read costs first touches of new pages each time, since
// malloc may give the freed one's memory to smaller allocations meanwhile.
#pragma once

#include <cstddef>
#include <string>

namespace kcache::util {

// A string of `size` bytes (contents unspecified), in this thread's spare buffer when it is big
// enough, else newly allocated.
std::string take_buffer(std::size_t size);

// Keeps `buffer`'s memory as this thread's spare when it is bigger than the spare (up to 4 MiB);
// otherwise it is freed. Safe at any time, thread exit included.
void give_back_buffer(std::string&& buffer) noexcept;

}  // namespace kcache::util
