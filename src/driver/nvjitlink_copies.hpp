// SPDX-License-Identifier: Apache-2.0
// Copies of nvJitLink for links that run at once, and of NVRTC beside them for CUDA C++ compiles
// that run at once. One copy of nvJitLink serialises part of each link on a lock of its own: 16
// threads of one process linked a corpus with each link 1.2x-2.1x its time alone across runs,
// where 16 processes slowed less; one NVRTC runs its compiles one at a time
// (docs/performance.md). A link takes the process's own nvJitLink when no other link holds it
// (one link at a time loads nothing more), else whichever loaded nvJitLink, the own or a copy,
// runs the fewest links; a link that finds the own busy starts loading a copy (dlmopen: a link
// map and C library of its own) in the background while fewer are loaded than allowed, and waits
// a while for a load under way where no copy is less busy than the own. NVRTC programs choose
// the same way among the own NVRTC and the copies' (each loaded into its copy's link map at
// first need), counted apart from links.
//
// A copy's calls run on threads of the copy's own, which live as long as the process, and no
// other code runs there: a copy has its own C library, but a thread's descriptor is the first C
// library's, and with it the slots of pthread_setspecific. The process's nvJitLink, on a thread
// where a copy had stored its per-thread data, took that data for its own and freed it into the
// wrong heap; at a thread's end the first C library would run its destructors on a copy's data.
// (The loader still runs a copy's destructors on the thread that exits the process.)
#pragma once

#include <cstddef>
#include <utility>

#include "driver/compiler_api.hpp"
#include "kcache/function_ref.hpp"
#include "kcache/result.hpp"

namespace kcache::driver {

struct NvJitLinkCopy;  // a copy, in nvjitlink_copies.cpp
class CopyThread;      // one of its threads

// What a lease is for: a link (nvJitLink) or an NVRTC program. Each library serialises its own
// work, so each counts its own users of the own and of every copy.
enum class CopyUse { kLink, kProgram };

// The copy one link or program calls, and where: every call of it goes through run().
class CopyLease {
public:
    CopyLease(CopyLease&& other) noexcept;
    CopyLease& operator=(CopyLease&&) = delete;
    CopyLease(const CopyLease&) = delete;
    CopyLease& operator=(const CopyLease&) = delete;
    ~CopyLease();

    bool is_copy() const { return copy_ != nullptr; }
    // Calls `work` where this lease's library may be called: here for the process's own, on
    // one of the copy's threads for a copy (this thread waits; calls from several threads at once
    // run one after another); what `work` throws is thrown here. False, `work` not called, for a
    // copy taken before fork() and called in the child, whose copies have no threads.
    [[nodiscard]] bool run(FunctionRef<void()> work) const;
    // `call()` through run(): its result, or `not_run` where it cannot run there, which also sets
    // `*not_ran`.
    template <class Call>
    auto result_of(Call call, decltype(call()) not_run, bool* not_ran) const {
        decltype(call()) out = std::move(not_run);
        if (!run([&] { out = call(); })) *not_ran = true;
        return out;
    }

protected:
    CopyLease(CopyUse use, NvJitLinkCopy* copy, CopyThread* thread)
        : use_(use), copy_(copy), thread_(thread) {}

private:
    CopyUse use_;
    NvJitLinkCopy* copy_;  // null: the process's own
    CopyThread* thread_;   // the copy's thread that runs this lease's calls
    bool held_ = true;     // false once moved from
};

// The nvJitLink one link calls.
class NvJitLinkLease : public CopyLease {
public:
    const NvJitLinkApi& api() const { return *api_; }

private:
    friend Result<NvJitLinkLease> lease_nvjitlink();
    NvJitLinkLease(const NvJitLinkApi* api, NvJitLinkCopy* copy, CopyThread* thread)
        : CopyLease(CopyUse::kLink, copy, thread), api_(api) {}

    const NvJitLinkApi* api_;
};

// The NVRTC one program calls, from its creation to its destruction: the process's own, or a
// copy loaded into a copy of nvJitLink's link map, chosen as links choose theirs.
class NvrtcLease : public CopyLease {
public:
    const NvrtcApi& api() const { return *api_; }

private:
    friend Result<NvrtcLease> lease_nvrtc();
    NvrtcLease(const NvrtcApi* api, NvJitLinkCopy* copy, CopyThread* thread)
        : CopyLease(CopyUse::kProgram, copy, thread), api_(api) {}

    const NvrtcApi* api_;
};

// kUnsupported, saying why, when nvJitLink cannot be loaded at all. A copy that cannot be loaded
// (the loader's static TLS is spent, say) is logged once and none is tried again; a thread that
// cannot start is logged once, and the link shares a loaded nvJitLink.
Result<NvJitLinkLease> lease_nvjitlink();
// The same for an NVRTC program: kUnsupported when NVRTC cannot be loaded at all. Once a program
// finds the own busy, NVRTC is loaded into each copy in the background, on a thread of the copy,
// and compiles a kernel there before programs take it; a program waits for that at most 500 ms.
// Where that fails, or no copy of nvJitLink can be loaded (each logged once), programs keep to
// the process's own NVRTC.
Result<NvrtcLease> lease_nvrtc();

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
