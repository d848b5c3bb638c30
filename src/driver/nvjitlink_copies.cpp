// SPDX-License-Identifier: Apache-2.0
#include "driver/nvjitlink_copies.hpp"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "util/env.hpp"
#include "util/log.hpp"

namespace kcache::driver {
namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

// glibc sets static TLS aside for the C libraries of 3 link maps beyond the first (its tunable
// glibc.rtld.nns, 4 by default); each copy takes one's share. More copies would spend what it
// keeps for the application's own dlopen of libraries with initial-exec TLS, which would then
// fail to load.
constexpr std::size_t kDefaultCopies = 3;
constexpr std::size_t kMostCopies = 15;

std::size_t copies_from_environment() {
    if (kSanitized) return 0;
    if (auto named = util::env_string("KCACHE_NVJITLINK_COPIES")) {
        std::size_t count = 0;
        const std::string_view text = *named;
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), count);
        if (error == std::errc() && end == text.data() + text.size()) {
            return std::min(count, kMostCopies);
        }
        util::warn_once("KCACHE_NVJITLINK_COPIES", "KCACHE_NVJITLINK_COPIES=" + *named +
                                                       " is not a count; no copies of nvJitLink "
                                                       "are loaded");
        return 0;
    }
    const unsigned threads = std::thread::hardware_concurrency();
    return std::min<std::size_t>(threads > 1 ? threads - 1 : 0, kDefaultCopies);
}

}  // namespace

// A copy of nvJitLink and the one thread that loads and calls it. Neither ends before the
// process: a copy cannot be unloaded, and its thread must never exit (the first C library would
// free the copy's thread-specific data into its own heap; the copy's constructors set some up on
// the thread that loads it).
class NvJitLinkCopy {
public:
    static Result<std::unique_ptr<NvJitLinkCopy>> start() {
        std::unique_ptr<NvJitLinkCopy> copy(new NvJitLinkCopy());
        try {
            std::thread(&NvJitLinkCopy::serve, copy.get()).detach();
        } catch (const std::system_error& e) {
            return Error(Errc::kUnsupported,
                         std::string("a thread for a copy of nvJitLink did not start: ") +
                             e.what());
        }
        std::unique_lock lock(copy->mutex_);
        copy->changed_.wait(lock, [&] { return copy->loaded_.has_value(); });
        if (!*copy->loaded_) {
            // Its thread stays, waiting for nothing: whatever the copy ran there before it failed
            // is not the first C library's to clean up. The caller leaks `copy` with it.
            Error failed = copy->loaded_->error();
            (void)copy.release();
            return failed;
        }
        return copy;
    }

    const NvJitLinkApi& api() const { return *api_; }

    // Runs `work` on the copy's thread while this one waits; what it throws is thrown here.
    void run(FunctionRef<void()> work) {
        std::unique_lock lock(mutex_);
        job_ = &work;
        changed_.notify_all();
        changed_.wait(lock, [&] { return job_ == nullptr; });
        if (thrown_) std::rethrow_exception(std::exchange(thrown_, nullptr));
    }

private:
    NvJitLinkCopy() = default;

    [[noreturn]] void serve() {
        auto api = load_nvjitlink_copy();
        std::unique_lock lock(mutex_);
        if (api) {
            api_ = std::move(*api);
            api_->enter_thread();
            loaded_ = ok();
        } else {
            loaded_ = std::move(api).error();
        }
        changed_.notify_all();
        for (;;) {
            changed_.wait(lock, [&] { return job_ != nullptr; });
            const FunctionRef<void()>* job = job_;
            lock.unlock();
            std::exception_ptr thrown;
            try {
                (*job)();
            } catch (...) {
                thrown = std::current_exception();
            }
            lock.lock();
            thrown_ = thrown;
            job_ = nullptr;
            changed_.notify_all();
        }
    }

    std::mutex mutex_;
    std::condition_variable changed_;
    std::optional<Result<void>> loaded_;        // guarded by mutex_: set once by the thread
    std::unique_ptr<NvJitLinkApi> api_;         // set with loaded_, then never changed
    const FunctionRef<void()>* job_ = nullptr;  // guarded by mutex_: the lessee's, while it waits
    std::exception_ptr thrown_;                 // guarded by mutex_
};

namespace {

// Which nvJitLink each link holds. Lives for the process, as its copies do.
class Copies {
public:
    static Copies& instance() {
        static auto* copies = new Copies();  // never destroyed: links may run during exit
        return *copies;
    }

    // The process's own when no link holds it; else a copy no link holds; else the own, shared.
    // Null for the process's own.
    NvJitLinkCopy* take() {
        std::unique_lock lock(mutex_);
        if (own_users_ == 0 || ::getpid() != owner_) {  // a forked child: the copies' threads
            ++own_users_;                               // are not in it
            return nullptr;
        }
        if (!free_.empty()) {
            NvJitLinkCopy* copy = free_.back();
            free_.pop_back();
            return copy;
        }
        if (loaded_.size() + loading_ < allowed_ && !failed_) {
            ++loading_;
            lock.unlock();  // a copy takes milliseconds to load; others link meanwhile
            auto copy = NvJitLinkCopy::start();
            lock.lock();
            --loading_;
            if (copy) {
                loaded_.push_back(std::move(*copy));
                return loaded_.back().get();
            }
            if (!failed_) {
                failed_ = true;
                util::log_line(util::LogLevel::kInfo,
                               "nvJitLink: no further copy (" + std::to_string(loaded_.size()) +
                                   " loaded): " + copy.error().message() +
                                   "; concurrent links share one");
            }
        }
        ++own_users_;
        return nullptr;
    }

    void give_back(NvJitLinkCopy* copy) {
        std::lock_guard lock(mutex_);
        if (copy != nullptr) {
            free_.push_back(copy);
        } else {
            --own_users_;
        }
    }

    std::size_t loaded() const {
        std::lock_guard lock(mutex_);
        return loaded_.size();
    }

    const std::size_t allowed_ = copies_from_environment();

private:
    Copies() = default;

    mutable std::mutex mutex_;
    const pid_t owner_ = ::getpid();
    std::size_t own_users_ = 0;                           // guarded by mutex_
    std::size_t loading_ = 0;                             // guarded by mutex_
    bool failed_ = false;                                 // guarded by mutex_
    std::vector<std::unique_ptr<NvJitLinkCopy>> loaded_;  // guarded by mutex_
    std::vector<NvJitLinkCopy*> free_;                    // guarded by mutex_
};

}  // namespace

NvJitLinkLease::NvJitLinkLease(NvJitLinkLease&& other) noexcept
    : api_(other.api_), copy_(other.copy_), held_(other.held_) {
    other.held_ = false;
}

NvJitLinkLease::~NvJitLinkLease() {
    if (held_) Copies::instance().give_back(copy_);
}

void NvJitLinkLease::run(FunctionRef<void()> work) const {
    if (copy_ == nullptr) {
        work();
    } else {
        copy_->run(work);
    }
}

Result<NvJitLinkLease> lease_nvjitlink() {
    const auto& own = nvjitlink_api();
    if (!own) return own.error();
    NvJitLinkCopy* copy = Copies::instance().take();
    return NvJitLinkLease(copy != nullptr ? &copy->api() : *own, copy);
}

std::size_t nvjitlink_copies_allowed() {
    return Copies::instance().allowed_;
}

std::size_t nvjitlink_copies_loaded() {
    return Copies::instance().loaded();
}

}  // namespace kcache::driver
