// SPDX-License-Identifier: Apache-2.0
// Loading the copies: a copy of nvJitLink, NVRTC into one, each on a thread of the copy's own,
// started with the copies' mutex let go; and the process's end waiting for the loads under way.
#include <pthread.h>

#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "driver/copies.hpp"
#include "util/log.hpp"

namespace kcache::driver {

Copies::Copies() {
    // A fork while another thread holds mutex_ would leave the child's copy of it locked for
    // ever, and the child's first link waiting on it.
    pthread_atfork([] { instance().mutex_.lock(); }, [] { instance().mutex_.unlock(); },
                   [] { instance().mutex_.unlock(); });
    // Loads run on threads of their own, NVRTC's first compile among them: the process's end
    // must not finalise the libraries under one (a crash seen in a review).
    std::atexit([] { instance().end_loads(); });
}

void Copies::end_loads() noexcept {
    if (forked()) return;
    std::unique_lock lock(mutex_);
    exiting_ = true;
    changed_.wait_for(lock, kExitPatience, [&] { return loading_ == 0 && nvrtc_loading_ == 0; });
}

void Copies::start_loads(std::unique_lock<std::mutex>& lock, bool program) {
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

void Copies::wait_for_starts() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return starting_ == 0; });
}

std::function<bool(CopyThread*)> Copies::copy_loader() {
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

std::function<bool(CopyThread*)> Copies::nvrtc_loader(NvJitLinkCopy& copy) {
    return [this, &copy](CopyThread* self) {
        wait_for_starts();
        copy.api->enter_thread();
        load_nvrtc_here(copy, self);
        return true;
    };
}

void Copies::load_ended() {
    ++loads_ended_;
    loads_stuck_ = false;
    changed_.notify_all();
}

void Copies::thread_not_started(CopyUse use, const Error& error) {
    if (thread_failed_) return;
    thread_failed_ = true;
    util::log_line(util::LogLevel::kInfo,
                   use == CopyUse::kProgram
                       ? "NVRTC: " + error.message() + "; CUDA C++ compiles share the loaded NVRTCs"
                       : "nvJitLink: " + error.message() + "; links share the loaded copies");
}

void Copies::load_nvrtc_here(NvJitLinkCopy& copy, CopyThread* self) {
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

}  // namespace kcache::driver
