// SPDX-License-Identifier: Apache-2.0
// Which library a link or program takes: the own or a copy (Copies::take, give_back), and the
// leases that hold it.
#include "driver/nvjitlink_copies.hpp"

#include <chrono>
#include <cstddef>
#include <mutex>

#include "driver/copies.hpp"

namespace kcache::driver {

Copies::Taken Copies::take(CopyUse use) {
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
    while (fewest == nullptr && own_[u] != 0 && (loading_ > 0 || (program && nvrtc_loading_ > 0)) &&
           !loads_stuck_) {
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

void Copies::give_back(const Taken& taken, CopyUse use) {
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

NvJitLinkCopy* Copies::least_busy_copy(std::size_t u) const {
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
