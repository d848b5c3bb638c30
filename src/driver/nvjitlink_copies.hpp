// SPDX-License-Identifier: Apache-2.0
// Copies of nvJitLink for links that run at once. One copy of the library serialises part of
// each link on a lock of its own: 16 threads of one process linked a corpus with each link
// 1.2x-2.1x its time alone across runs, where 16 processes slowed less (docs/performance.md). A
// link takes the process's own nvJitLink when no other link holds it (one link at a time loads
// nothing more), else whichever loaded nvJitLink, the own or a copy, runs the fewest links; a
// link that finds the own busy starts loading a copy (dlmopen: a link map and C library of its
// own) in the background while fewer are loaded than allowed, and waits a while for a load under
// way where no copy is less busy than the own.
//
// A copy's calls run on threads of the copy's own, which live as long as the process, and no
// other code runs there: a copy has its own C library, but a thread's descriptor is the first C
// library's, and with it the slots of pthread_setspecific. The process's nvJitLink, on a thread
// where a copy had stored its per-thread data, took that data for its own and freed it into the
// wrong heap; at a thread's end the first C library would run its destructors on a copy's data.
// (The loader still runs a copy's destructors on the thread that exits the process.)
#pragma once

#include <cstddef>

#include "driver/compiler_api.hpp"
#include "kcache/function_ref.hpp"
#include "kcache/result.hpp"

namespace kcache::driver {

struct NvJitLinkCopy;  // a copy, in nvjitlink_copies.cpp
class CopyThread;      // one of its threads

// The nvJitLink one link calls, and where: every call of the link goes through run().
class NvJitLinkLease {
public:
    NvJitLinkLease(NvJitLinkLease&& other) noexcept;
    NvJitLinkLease& operator=(NvJitLinkLease&&) = delete;
    NvJitLinkLease(const NvJitLinkLease&) = delete;
    NvJitLinkLease& operator=(const NvJitLinkLease&) = delete;
    ~NvJitLinkLease();

    const NvJitLinkApi& api() const { return *api_; }
    bool is_copy() const { return copy_ != nullptr; }
    // Calls `work` where this lease's nvJitLink may be called: here for the process's own, on
    // one of the copy's threads for a copy (this thread waits; calls from several threads at once
    // run one after another); what `work` throws is thrown here. False, `work` not called, for a
    // copy taken before fork() and called in the child, whose copies have no threads.
    [[nodiscard]] bool run(FunctionRef<void()> work) const;

private:
    friend Result<NvJitLinkLease> lease_nvjitlink();
    NvJitLinkLease(const NvJitLinkApi* api, NvJitLinkCopy* copy, CopyThread* thread)
        : api_(api), copy_(copy), thread_(thread) {}

    const NvJitLinkApi* api_;
    NvJitLinkCopy* copy_;  // null: the process's own
    CopyThread* thread_;   // the copy's thread that runs this link's calls
    bool held_ = true;     // false once moved from
};

// kUnsupported, saying why, when nvJitLink cannot be loaded at all. A copy that cannot be loaded
// (the loader's static TLS is spent, say) is logged once and none is tried again; a thread that
// cannot start is logged once, and the link shares a loaded nvJitLink.
Result<NvJitLinkLease> lease_nvjitlink();

// How many copies a process may load: KCACHE_NVJITLINK_COPIES when set (0: none; at most 15),
// else 3 (fewer with fewer hardware threads): the C libraries glibc sets static TLS aside for.
// None in a process built with a sanitizer, whose interceptors would not see into a copy's C
// library.
std::size_t nvjitlink_copies_allowed();

// The copies loaded so far, for tests and diagnostics.
std::size_t nvjitlink_copies_loaded();
// Returns once no copy is being loaded: for tests.
void nvjitlink_copies_wait_for_loads();

}  // namespace kcache::driver
