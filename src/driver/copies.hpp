// SPDX-License-Identifier: Apache-2.0
// Inside the copies of nvJitLink and NVRTC (driver/nvjitlink_copies.hpp says what they are for):
// the copies loaded, their threads and their counts, shared by what chooses a copy for a link or
// program (nvjitlink_copies.cpp) and what loads them (copy_loads.cpp). Only those two include it.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <type_traits>
#include <vector>

#include "driver/compiler_api.hpp"
#include "driver/copies_allowed.hpp"
#include "driver/copy_thread.hpp"
#include "driver/nvjitlink_copies.hpp"
#include "kcache/result.hpp"

namespace kcache::driver {

// A copy of nvJitLink, NVRTC beside it once programs have wanted one, and its threads, one for
// each of its links and programs at once.
struct NvJitLinkCopy {
    enum class Nvrtc { kNone, kLoading, kReady, kFailed };

    std::unique_ptr<NvJitLinkApi> api;  // set by the first thread before the copy is listed
    std::vector<CopyThread*> idle;      // guarded by the Copies' mutex
    // Guarded by the Copies' mutex: the links and NVRTC programs running in it (CopyUse).
    std::array<std::size_t, 2> running{};
    Nvrtc nvrtc_state = Nvrtc::kNone;  // guarded by the Copies' mutex
    std::unique_ptr<NvrtcApi> nvrtc;   // set before nvrtc_state becomes kReady, then never again
};

// Which nvJitLink each link holds. Lives for the process, as its copies do.
class Copies {
public:
    struct Taken {
        NvJitLinkCopy* copy = nullptr;  // null: the process's own
        CopyThread* thread = nullptr;
    };

    static Copies& instance() {
        static auto* copies = new Copies();  // never destroyed: links may run during exit
        return *copies;
    }

    // The process's own when no link (or program, for `use`) holds it; else whichever loaded
    // library, the own or a copy's, runs the fewest. A link that finds the own busy starts a
    // copy's load in the background while fewer are loaded than allowed, and where every loaded
    // nvJitLink is as busy as the own and a load is under way, waits for it, at most
    // kLoadPatience, or until the own or a copy is let go: the links that start together (a
    // warm-up's first) would otherwise all share the own with the first, the longest. A load that
    // outlasts the patience is stuck (the loader's lock held by this thread, in a library's
    // constructor, say): links then wait for no load until one ends. Programs do the same, taking
    // only copies whose NVRTC is loaded and has compiled once (which it does on a copy's thread of
    // its own, never a program's), and waiting at most kProgramPatience; none once NVRTC could not
    // be loaded or compile in a copy. Nothing here names a compiler library (which may take the
    // loader's lock, that a thread holding it and waiting for mutex_ would never let go): the
    // copies' threads load them, and a process without nvJitLink finds out there (logged once), its
    // programs keeping to the own. Nor does it start a thread with mutex_ held (without_lock).
    Taken take(CopyUse use);

    // Wakes those waiting for a load where the own, or a copy, became free enough to take. Not in
    // a forked child: its copy of changed_ may hold the parent's waiters, which it does not have.
    void give_back(const Taken& taken, CopyUse use);

    bool forked() const { return ::getpid() != owner_; }

    bool exiting() const {
        std::lock_guard lock(mutex_);
        return exiting_;
    }

    std::size_t loaded() const {
        std::lock_guard lock(mutex_);
        return copies_.size();
    }

    void wait_for_loads() {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [&] { return loading_ == 0 && nvrtc_loading_ == 0; });
    }

    const std::size_t allowed_ = copies_allowed_here();

private:
    // How long a link waits for a copy's load: a load takes 10-15 ms on an idle machine.
    static constexpr std::chrono::milliseconds kLoadPatience{100};
    // How long a program waits for a copy's NVRTC (its load and a first compile, some 50-150 ms
    // on the CPU machine, with nvJitLink's before it): a CUDA C++ compile takes a second or more,
    // which a program behind another in the own NVRTC would wait.
    static constexpr std::chrono::milliseconds kProgramPatience{500};
    // How long the process's end waits for loads under way.
    static constexpr std::chrono::milliseconds kExitPatience{5000};

    Copies();

    // At exit(), before the libraries are finalised: no load starts any more, a loading NVRTC
    // skips its first compile, and the loads under way are waited for, at most kExitPatience (one
    // stuck behind the loader's lock would wait for ever). Nothing in a forked child, whose
    // copies' threads are not in it.
    void end_loads() noexcept;

    // Requires mutex_. The loaded copy running fewer of use `u` than the own, the fewest; else
    // null. For programs, only copies whose NVRTC is ready.
    NvJitLinkCopy* least_busy_copy(std::size_t u) const;

    // Requires mutex_, through `lock`, which it lets go while threads start (without_lock) and
    // holds again on return. Starts the loads that a take() beside the busy own asks for: NVRTC's
    // into every copy at the first program's, and a copy's while fewer are loaded than allowed.
    // Each is marked before mutex_ is let go (an NVRTC kLoading, counted in nvrtc_loading_; a
    // copy's in loading_), so that no other take() starts it again and those waiting for loads
    // (exit() among them) wait for it, and unmarked where its thread did not start.
    void start_loads(std::unique_lock<std::mutex>& lock, bool program);

    // Requires mutex_, through `lock`. Runs `starts`, which starts copies' threads and throws
    // nothing, with mutex_ let go, and returns what it returns. pthread_create waits for glibc's
    // TLS lock (dl_load_tls_lock), which a dlmopen holds while it waits for the lock that
    // dl_iterate_phdr holds; a thread in a dl_iterate_phdr callback that waits for mutex_ (a
    // program let go there) would close the cycle if a start held mutex_. Counted in starting_
    // meanwhile, which the loads wait out before they begin (wait_for_starts): the threads started
    // together are all started before any of them enters the loader, else the first's dlmopen,
    // stuck behind a dl_iterate_phdr of the thread starting them (or of one waiting for it),
    // would hold the TLS lock that the next start waits for. A start that begins while a load is
    // already inside the loader may still wait for that load: the loads of a later take().
    template <class Starts>
    std::invoke_result_t<Starts> without_lock(std::unique_lock<std::mutex>& lock, Starts starts) {
        struct Relock {
            Copies& copies;
            std::unique_lock<std::mutex>& lock;
            ~Relock() {
                lock.lock();
                if (--copies.starting_ == 0) copies.changed_.notify_all();  // the loads go
            }
        };
        ++starting_;
        lock.unlock();
        const Relock relock{*this, lock};
        return starts();
    }

    // On a load's thread, before it loads anything: returns once no copy's thread is starting.
    void wait_for_starts();

    // For a thread that loads a copy, then lists it with itself as its idle thread: counted in
    // loading_.
    std::function<bool(CopyThread*)> copy_loader();

    // For a thread of `copy`, whose NVRTC state is kLoading, that loads NVRTC into its link map,
    // then serves.
    std::function<bool(CopyThread*)> nvrtc_loader(NvJitLinkCopy& copy);

    // Requires mutex_. A load (of a copy, or of NVRTC into one) ended: those waiting look again.
    void load_ended();

    // Requires mutex_. A copy's thread did not start (logged once): what `use` runs shares the
    // libraries loaded.
    void thread_not_started(CopyUse use, const Error& error);

    // On `self`, a thread of `copy` whose NVRTC state is kLoading: loads NVRTC into the copy's
    // link map and compiles a kernel there once, so that what NVRTC loads at its first compile
    // (its builtins, the CUDA driver) is loaded before any program waits on this copy; then lists
    // `self` as idle. A failure is logged once, and programs then take no copy.
    void load_nvrtc_here(NvJitLinkCopy& copy, CopyThread* self);

    mutable std::mutex mutex_;
    std::condition_variable changed_;  // with mutex_: a load ended, or the own or a copy let go
    const pid_t owner_ = ::getpid();
    std::array<std::size_t, 2> own_{};  // guarded by mutex_: by CopyUse
    std::size_t loading_ = 0;           // guarded by mutex_
    std::size_t loads_ended_ = 0;       // guarded by mutex_
    bool loads_stuck_ = false;          // guarded by mutex_: until one ends
    bool load_failed_ = false;          // guarded by mutex_
    bool nvrtc_failed_ = false;         // guarded by mutex_: logged once
    bool exiting_ = false;              // guarded by mutex_: exit() has begun
    bool nvrtc_wanted_ = false;         // guarded by mutex_: a program found the own NVRTC busy
    std::size_t nvrtc_loading_ = 0;     // guarded by mutex_
    std::size_t starting_ = 0;          // guarded by mutex_: takes starting threads (without_lock)
    bool thread_failed_ = false;        // guarded by mutex_: logged once
    std::vector<std::unique_ptr<NvJitLinkCopy>> copies_;  // guarded by mutex_
};

}  // namespace kcache::driver
