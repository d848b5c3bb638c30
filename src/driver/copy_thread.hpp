// SPDX-License-Identifier: Apache-2.0
// The threads a copy of nvJitLink (and NVRTC beside it) runs its calls on:
// driver/nvjitlink_copies.hpp says why a copy's code runs only on threads of its own.
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <utility>

#include "kcache/function_ref.hpp"
#include "kcache/result.hpp"

namespace kcache::driver {

// A thread that runs a copy's calls, one at a time, and nothing else. It never ends (nor does
// the copy, which cannot be unloaded): at its end the first C library would free the copy's
// thread-specific data (its slots are in the thread's descriptor, which is the first C library's)
// into its own heap. A copy's constructors set some up on the thread that loads it, so a copy's
// first thread is the one that loads it.
class CopyThread {
public:
    // Starts the thread, which runs `first(thread)` (the copy's load, or entering a loaded copy)
    // and then serves calls if it returned true, else waits for ever (whatever the copy ran
    // there is not the first C library's to clean up). Does not wait for `first`: a caller inside
    // the loader (a library's constructor) would wait for ever on a load that needs the loader.
    // Throws nothing (a `first` small enough for std::function to hold in place allocates
    // nothing): the copies undo what they marked as starting when a start fails.
    static Result<CopyThread*> start(std::function<bool(CopyThread*)> first) noexcept {
        auto* thread = new (std::nothrow) CopyThread();  // lives as long as its thread: for ever
        if (thread == nullptr) return not_started("out of memory");
        try {
            std::thread(&CopyThread::serve, thread, std::move(first)).detach();
        } catch (const std::exception& e) {  // std::system_error, or std::bad_alloc
            delete thread;
            return not_started(e.what());
        }
        return thread;
    }

    // Runs `work` on this thread while the caller waits, after the calls posted before it; what
    // it throws is thrown here.
    void run(FunctionRef<void()> work) {
        Call call{&work, nullptr, false};
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [&] { return call_ == nullptr; });
        call_ = &call;
        changed_.notify_all();
        changed_.wait(lock, [&] { return call.done; });
        if (call.thrown) std::rethrow_exception(call.thrown);
    }

private:
    struct Call {
        FunctionRef<void()>* work;
        std::exception_ptr thrown;
        bool done = false;
    };

    CopyThread() = default;

    static Error not_started(const char* why) noexcept {
        try {
            return Error(Errc::kUnsupported,
                         std::string("a thread for a copy of nvJitLink did not start: ") + why);
        } catch (...) {  // the message did not fit in memory: a short one does (in place)
            return Error(Errc::kUnsupported, "out of memory");
        }
    }

    [[noreturn]] void serve(const std::function<bool(CopyThread*)>& first) {
        bool serving = false;
        try {
            serving = first(this);
        } catch (...) {  // NOLINT(bugprone-empty-catch): `first` says what failed; no serving
        }
        std::unique_lock lock(mutex_);
        for (;;) {
            changed_.wait(lock, [&] { return serving && call_ != nullptr; });
            Call* call = call_;
            lock.unlock();
            try {
                (*call->work)();
            } catch (...) {
                call->thrown = std::current_exception();
            }
            lock.lock();
            call->done = true;
            call_ = nullptr;
            changed_.notify_all();
        }
    }

    std::mutex mutex_;
    std::condition_variable changed_;
    Call* call_ = nullptr;  // guarded by mutex_: the call running or next, its caller waiting
};

}  // namespace kcache::driver
