// SPDX-License-Identifier: Apache-2.0
#include "driver/nvjitlink_copies.hpp"

#include <pthread.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "driver/copies_allowed.hpp"
#include "driver/copy_thread.hpp"
#include "util/log.hpp"

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

namespace {

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
    Taken take(CopyUse use) {
        const auto u = static_cast<std::size_t>(use);
        const bool program = use == CopyUse::kProgram;
        std::unique_lock lock(mutex_);
        // A forked child: the copies' threads are not in it.
        if (own_[u] == 0 || forked() || (program && nvrtc_failed_)) {
            ++own_[u];
            return {};
        }
        start_loads(lock, program);
        NvJitLinkCopy* fewest = least_busy_copy(u);
        const auto deadline =
            std::chrono::steady_clock::now() + (program ? kProgramPatience : kLoadPatience);
        // Until a load ends, or the own or a copy is let go (its link or program may be short):
        // then the copy less busy than the own is taken, or the own where none is.
        while (fewest == nullptr && own_[u] != 0 &&
               (loading_ > 0 || (program && nvrtc_loading_ > 0)) && !loads_stuck_) {
            const std::size_t ended = loads_ended_;
            if (!changed_.wait_until(lock, deadline, [&] {
                    return loads_ended_ != ended || own_[u] == 0 || least_busy_copy(u) != nullptr;
                })) {
                loads_stuck_ = true;
            }
            fewest = least_busy_copy(u);
        }
        if (fewest == nullptr) {
            ++own_[u];
            return {};
        }
        ++fewest->running[u];  // before mutex_ is let go below: no other take() counts it free
        if (!fewest->idle.empty()) {
            CopyThread* thread = fewest->idle.back();
            fewest->idle.pop_back();
            return {fewest, thread};
        }
        // Started here, not waited for: the link's first call waits until it serves.
        auto thread = without_lock(lock, [api = fewest->api.get()]() noexcept {
            return CopyThread::start([api](CopyThread*) {
                api->enter_thread();
                return true;
            });
        });
        if (!thread) {
            thread_not_started(use, thread.error());
            --fewest->running[u];
            ++own_[u];
            changed_.notify_all();  // the copy may be free enough for a waiter again
            return {};
        }
        return {fewest, *thread};
    }

    // Wakes those waiting for a load where the own, or a copy, became free enough to take. Not in
    // a forked child: its copy of changed_ may hold the parent's waiters, which it does not have.
    void give_back(const Taken& taken, CopyUse use) {
        const auto u = static_cast<std::size_t>(use);
        std::lock_guard lock(mutex_);
        bool takeable = false;
        if (taken.copy == nullptr) {
            takeable = --own_[u] == 0;
        } else {
            takeable = --taken.copy->running[u] < own_[u];
            taken.copy->idle.push_back(taken.thread);
        }
        if (takeable && !forked()) changed_.notify_all();
    }

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

    Copies() {
        // A fork while another thread holds mutex_ would leave the child's copy of it locked for
        // ever, and the child's first link waiting on it.
        pthread_atfork([] { instance().mutex_.lock(); }, [] { instance().mutex_.unlock(); },
                       [] { instance().mutex_.unlock(); });
        // Loads run on threads of their own, NVRTC's first compile among them: the process's end
        // must not finalise the libraries under one (a crash seen in a review).
        std::atexit([] { instance().end_loads(); });
    }

    // At exit(), before the libraries are finalised: no load starts any more, a loading NVRTC
    // skips its first compile, and the loads under way are waited for, at most kExitPatience (one
    // stuck behind the loader's lock would wait for ever). Nothing in a forked child, whose
    // copies' threads are not in it.
    void end_loads() noexcept {
        if (forked()) return;
        std::unique_lock lock(mutex_);
        exiting_ = true;
        changed_.wait_for(lock, kExitPatience,
                          [&] { return loading_ == 0 && nvrtc_loading_ == 0; });
    }

    // Requires mutex_. The loaded copy running fewer of use `u` than the own, the fewest; else
    // null. For programs, only copies whose NVRTC is ready.
    NvJitLinkCopy* least_busy_copy(std::size_t u) const {
        NvJitLinkCopy* fewest = nullptr;
        std::size_t least = own_[u];
        for (const auto& copy : copies_) {
            if (u == static_cast<std::size_t>(CopyUse::kProgram) &&
                copy->nvrtc_state != NvJitLinkCopy::Nvrtc::kReady) {
                continue;
            }
            if (copy->running[u] < least) {
                fewest = copy.get();
                least = copy->running[u];
            }
        }
        return fewest;
    }

    // Requires mutex_, through `lock`, which it lets go while threads start (without_lock) and
    // holds again on return. Starts the loads that a take() beside the busy own asks for: NVRTC's
    // into every copy at the first program's, and a copy's while fewer are loaded than allowed.
    // Each is marked before mutex_ is let go (an NVRTC kLoading, counted in nvrtc_loading_; a
    // copy's in loading_), so that no other take() starts it again and those waiting for loads
    // (exit() among them) wait for it, and unmarked where its thread did not start.
    void start_loads(std::unique_lock<std::mutex>& lock, bool program) {
        std::vector<NvJitLinkCopy*> nvrtc;
        if (program && !nvrtc_wanted_ && !exiting_) {
            nvrtc.reserve(copies_.size());  // before any mark: a throw here leaves none
            nvrtc_wanted_ = true;
            for (const auto& copy : copies_) {
                if (copy->nvrtc_state != NvJitLinkCopy::Nvrtc::kNone) continue;
                copy->nvrtc_state = NvJitLinkCopy::Nvrtc::kLoading;
                ++nvrtc_loading_;
                nvrtc.push_back(copy.get());
            }
        }
        const bool load = copies_.size() + loading_ < allowed_ && !load_failed_ && !exiting_;
        if (load) ++loading_;
        if (nvrtc.empty() && !load) return;
        std::size_t nvrtc_started = 0;
        std::optional<Error> nvrtc_not_started;  // why; the NVRTCs' starts end at the first
        std::optional<Error> load_not_started;
        without_lock(lock, [&]() noexcept {
            for (; nvrtc_started < nvrtc.size(); ++nvrtc_started) {
                auto started = CopyThread::start(nvrtc_loader(*nvrtc[nvrtc_started]));
                if (!started) {
                    nvrtc_not_started = std::move(started).error();
                    break;
                }
            }
            if (!load) return;
            if (auto started = CopyThread::start(copy_loader()); !started) {
                load_not_started = std::move(started).error();
            }
        });
        if (nvrtc_not_started) {
            thread_not_started(CopyUse::kProgram, *nvrtc_not_started);
            for (std::size_t n = nvrtc_started; n < nvrtc.size(); ++n) {
                nvrtc[n]->nvrtc_state = NvJitLinkCopy::Nvrtc::kNone;  // as if never wanted
                --nvrtc_loading_;
            }
            load_ended();
        }
        if (load_not_started) {
            thread_not_started(CopyUse::kLink, *load_not_started);
            --loading_;
            load_ended();
        }
    }

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
    void wait_for_starts() {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [&] { return starting_ == 0; });
    }

    // For a thread that loads a copy, then lists it with itself as its idle thread: counted in
    // loading_.
    std::function<bool(CopyThread*)> copy_loader() {
        return [this](CopyThread* self) {
            wait_for_starts();
            std::unique_ptr<NvJitLinkCopy> copy;
            Result<std::unique_ptr<NvJitLinkApi>> api =
                Error(Errc::kUnsupported, "out of memory while loading a copy of nvJitLink");
            try {
                copy = std::make_unique<NvJitLinkCopy>();
                api = load_nvjitlink_copy();
            } catch (const std::bad_alloc&) {  // api says so
            }
            if (api) {
                copy->api = std::move(*api);
                copy->api->enter_thread();
            }
            std::unique_lock lock(mutex_);
            --loading_;
            load_ended();
            if (api) {
                NvJitLinkCopy& listed = *copy;
                copies_.push_back(std::move(copy));
                if (!nvrtc_wanted_ || nvrtc_failed_) {
                    listed.idle.push_back(self);
                    return true;
                }
                // Programs want NVRTCs: this thread loads the copy's, then serves.
                listed.nvrtc_state = NvJitLinkCopy::Nvrtc::kLoading;
                ++nvrtc_loading_;
                lock.unlock();
                load_nvrtc_here(listed, self);
                return true;
            }
            if (!load_failed_) {
                load_failed_ = true;
                util::log_line(util::LogLevel::kInfo,
                               "nvJitLink: no further copy (" + std::to_string(copies_.size()) +
                                   " loaded; PTX links and CUDA C++ compiles share what is "
                                   "loaded): " +
                                   api.error().message());
            }
            return false;
        };
    }

    // For a thread of `copy`, whose NVRTC state is kLoading, that loads NVRTC into its link map,
    // then serves.
    std::function<bool(CopyThread*)> nvrtc_loader(NvJitLinkCopy& copy) {
        return [this, &copy](CopyThread* self) {
            wait_for_starts();
            copy.api->enter_thread();
            load_nvrtc_here(copy, self);
            return true;
        };
    }

    // Requires mutex_. A load (of a copy, or of NVRTC into one) ended: those waiting look again.
    void load_ended() {
        ++loads_ended_;
        loads_stuck_ = false;
        changed_.notify_all();
    }

    // Requires mutex_. A copy's thread did not start (logged once): what `use` runs shares the
    // libraries loaded.
    void thread_not_started(CopyUse use, const Error& error) {
        if (thread_failed_) return;
        thread_failed_ = true;
        util::log_line(
            util::LogLevel::kInfo,
            use == CopyUse::kProgram
                ? "NVRTC: " + error.message() + "; CUDA C++ compiles share the loaded NVRTCs"
                : "nvJitLink: " + error.message() + "; links share the loaded copies");
    }

    // On `self`, a thread of `copy` whose NVRTC state is kLoading: loads NVRTC into the copy's
    // link map and compiles a kernel there once, so that what NVRTC loads at its first compile
    // (its builtins, the CUDA driver) is loaded before any program waits on this copy; then lists
    // `self` as idle. A failure is logged once, and programs then take no copy.
    void load_nvrtc_here(NvJitLinkCopy& copy, CopyThread* self) {
        std::unique_ptr<NvrtcApi> ready;
        std::string why;
        try {
            why = "out of memory while loading NVRTC into a copy";
            auto loaded = load_nvrtc_copy(*copy.api);
            if (!loaded) {
                why = loaded.error().message();
            } else if (exiting()) {
                why = "the process is ending";
            } else if (auto compiled = compile_once(**loaded); !compiled) {
                why = compiled.error().message();
            } else {
                ready = std::move(*loaded);
            }
        } catch (...) {  // NOLINT(bugprone-empty-catch): `why` says what failed
        }
        bool first_failure = false;
        {
            std::lock_guard lock(mutex_);
            if (ready) {
                copy.nvrtc = std::move(ready);
                copy.nvrtc_state = NvJitLinkCopy::Nvrtc::kReady;
            } else {
                copy.nvrtc_state = NvJitLinkCopy::Nvrtc::kFailed;
                first_failure = !nvrtc_failed_ && !exiting_;
                nvrtc_failed_ = true;
            }
            --nvrtc_loading_;
            load_ended();
            copy.idle.push_back(self);
        }
        // This thread serves once listed: nothing may be thrown from here on.
        if (first_failure) {
            try {
                util::log_line(util::LogLevel::kInfo,
                               "NVRTC: no copy beside nvJitLink's copies; CUDA C++ compiles share "
                               "the process's NVRTC: " +
                                   why);
            } catch (...) {  // NOLINT(bugprone-empty-catch): a line unlogged
            }
        }
    }

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

}  // namespace

CopyLease::CopyLease(CopyLease&& other) noexcept
    : use_(other.use_), copy_(other.copy_), thread_(other.thread_), held_(other.held_) {
    other.held_ = false;
}

CopyLease::~CopyLease() {
    if (held_) Copies::instance().give_back({copy_, thread_}, use_);
}

bool CopyLease::run(FunctionRef<void()> work) const {
    if (thread_ == nullptr) {
        work();
        return true;
    }
    if (Copies::instance().forked()) return false;
    thread_->run(work);
    return true;
}

Result<NvJitLinkLease> lease_nvjitlink() {
    const auto& own = nvjitlink_api();
    if (!own) return own.error();
    const Copies::Taken taken = Copies::instance().take(CopyUse::kLink);
    const NvJitLinkApi* api = taken.copy != nullptr ? taken.copy->api.get() : *own;
    return NvJitLinkLease(api, taken.copy, taken.thread);
}

Result<NvrtcLease> lease_nvrtc() {
    const auto& own = nvrtc_api();
    if (!own) return own.error();
    const Copies::Taken taken = Copies::instance().take(CopyUse::kProgram);
    // A copy taken is one whose NVRTC is ready: set before it was, and never again.
    const NvrtcApi* api = taken.copy != nullptr ? taken.copy->nvrtc.get() : *own;
    return NvrtcLease(api, taken.copy, taken.thread);
}

std::size_t nvjitlink_copies_allowed() {
    return Copies::instance().allowed_;
}

std::size_t nvjitlink_copies_loaded() {
    return Copies::instance().loaded();
}

void nvjitlink_copies_wait_for_loads() {
    Copies::instance().wait_for_loads();
}

}  // namespace kcache::driver
