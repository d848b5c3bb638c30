// SPDX-License-Identifier: Apache-2.0
// A small number that no other live thread holds, used to give per-thread counters a cache line
// each that only their thread writes.
#pragma once

#include <cstdint>

namespace kcache::util {

namespace detail {
// The calling thread's slot plus one; 0 before its first call. Trivially destructible, so reading
// it costs no TLS wrapper call.
extern constinit thread_local std::uint32_t t_slot_plus_one;
std::uint32_t claim_thread_slot() noexcept;
}  // namespace detail

// Dense (the lowest free number), claimed at a thread's first call and given back when the thread
// ends, so that a later thread may take it. A slot's next holder starts after its last holder
// stopped writing: handing it over goes through a mutex, which orders the two.
inline std::uint32_t thread_slot() noexcept {
    const std::uint32_t slot = detail::t_slot_plus_one;
    return slot != 0 ? slot - 1 : detail::claim_thread_slot();
}

}  // namespace kcache::util
