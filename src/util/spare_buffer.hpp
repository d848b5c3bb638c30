// SPDX-License-Identifier: Apache-2.0
// Each thread's one spare byte buffer: storage that a file read can take instead of fresh heap.
//
// A disk hit reads an entry, loads its cubin, and drops it. Freed, those bytes often go back to
// the system (glibc trims its heap top, and the CUDA driver's own allocations between two loads
// make that likely), so the next read would fault its pages in again, a large part of a disk hit
// (docs/performance.md). An entry's bytes come back here when it dies, and the next read on this
// thread reuses them, with their pages still mapped.
#pragma once

#include <cstddef>
#include <string>

namespace kcache::util {

// Storage larger than this is freed rather than kept: one kept buffer per thread stays small.
inline constexpr std::size_t kSpareBufferLimit = std::size_t{4} << 20;

// This thread's spare buffer, emptied (its capacity kept), or a new empty string if it has none.
std::string take_spare_buffer();

// Keeps `bytes`' storage as this thread's spare when it has none and the storage is at most
// kSpareBufferLimit; otherwise lets it go. Safe at any point of a thread's life, exit included.
void give_spare_buffer(std::string&& bytes) noexcept;

}  // namespace kcache::util
