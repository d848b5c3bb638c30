// SPDX-License-Identifier: Apache-2.0
#include "driver/nvjitlink_copies.hpp"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <condition_variable>
#include <exception>
#include <functional>
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

// A thread that runs a copy's calls for one link at a time, and nothing else. It never ends
// (nor does the copy, which cannot be unloaded): at its end the first C library would free the
// copy's thread-specific data (its slots are in the thread's descriptor, which is the first C
// library's) into its own heap. A copy's constructors set some up on the thread that loads it,
// so a copy's first thread is the one that loads it.
class CopyThread {
public:
    // Starts the thread, which first runs `first` (the copy's load, or entering a loaded copy),
    // then serves; its error if `first` failed (the thread then waits for ever: whatever the copy
    // ran there is not the first C library's to clean up).
    static Result<CopyThread*> start(std::function<Result<void>()> first) {
        auto* thread = new CopyThread();  // lives as long as its thread: for ever
        try {
            std::thread(&CopyThread::serve, thread, std::move(first)).detach();
        } catch (const std::system_error& e) {
            delete thread;
            return Error(
                Errc::kUnsupported,
                std::string("a thread for a copy of nvJitLink did not start: ") + e.what());
        }
        std::unique_lock lock(thread->mutex_);
        thread->changed_.wait(lock, [&] { return thread->started_.has_value(); });
        if (!*thread->started_) return thread->started_->error();
        return thread;
    }

    // Runs `work` on this thread while the caller waits; what it throws is thrown here.
    void run(FunctionRef<void()> work) {
        std::unique_lock lock(mutex_);
        job_ = &work;
        changed_.notify_all();
        changed_.wait(lock, [&] { return job_ == nullptr; });
        if (thrown_) std::rethrow_exception(std::exchange(thrown_, nullptr));
    }

private:
    CopyThread() = default;

    [[noreturn]] void serve(const std::function<Result<void>()>& first) {
        Result<void> started = first();
        std::unique_lock lock(mutex_);
        started_ = std::move(started);
        changed_.notify_all();
        for (;;) {
            changed_.wait(lock, [&] { return job_ != nullptr && *started_; });
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
    std::optional<Result<void>> started_;       // guarded by mutex_: set once by the thread
    const FunctionRef<void()>* job_ = nullptr;  // guarded by mutex_: the caller's, while it waits
    std::exception_ptr thrown_;                 // guarded by mutex_
};

// A copy of nvJitLink and its threads, one for each of its links at once.
struct NvJitLinkCopy {
    std::unique_ptr<NvJitLinkApi> api;  // set by the first thread, then never changed
    std::vector<CopyThread*> idle;      // guarded by the Copies' mutex
    std::size_t links = 0;              // guarded by the Copies' mutex: links running in it
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

    // The process's own when no link holds it; else a copy loaded now, while fewer are loaded
    // than allowed; else whichever nvJitLink, the own or a copy, runs the fewest links.
    Taken take() {
        std::unique_lock lock(mutex_);
        if (own_links_ == 0 || ::getpid() != owner_) {  // a forked child: the copies' threads
            ++own_links_;                               // are not in it
            return {};
        }
        if (copies_.size() + loading_ < allowed_ && !load_failed_) {
            ++loading_;
            lock.unlock();  // a copy takes milliseconds to load; others link meanwhile
            auto copy = std::make_unique<NvJitLinkCopy>();
            auto thread = CopyThread::start([copy = copy.get()]() -> Result<void> {
                auto api = load_nvjitlink_copy();
                if (!api) return std::move(api).error();
                copy->api = std::move(*api);
                copy->api->enter_thread();
                return ok();
            });
            lock.lock();
            --loading_;
            if (thread) {
                copy->links = 1;
                copies_.push_back(std::move(copy));
                return {copies_.back().get(), *thread};
            }
            if (!load_failed_) {
                load_failed_ = true;
                util::log_line(util::LogLevel::kInfo, "nvJitLink: no further copy (" +
                                                          std::to_string(copies_.size()) +
                                                          " loaded): " + thread.error().message());
            }
            (void)copy.release();  // its thread may hold it, waiting for ever
        }
        NvJitLinkCopy* fewest = nullptr;
        std::size_t least = own_links_;
        for (const auto& copy : copies_) {
            if (copy->links < least) {
                fewest = copy.get();
                least = copy->links;
            }
        }
        if (fewest == nullptr) {
            ++own_links_;
            return {};
        }
        ++fewest->links;
        if (!fewest->idle.empty()) {
            CopyThread* thread = fewest->idle.back();
            fewest->idle.pop_back();
            return {fewest, thread};
        }
        lock.unlock();  // a thread starts in tens of microseconds
        auto thread = CopyThread::start([api = fewest->api.get()]() -> Result<void> {
            api->enter_thread();
            return ok();
        });
        lock.lock();
        if (thread) return {fewest, *thread};
        --fewest->links;
        ++own_links_;
        util::log_line(util::LogLevel::kInfo, "nvJitLink: " + thread.error().message() +
                                                  "; this link shares the process's own");
        return {};
    }

    void give_back(const Taken& taken) {
        std::lock_guard lock(mutex_);
        if (taken.copy == nullptr) {
            --own_links_;
            return;
        }
        --taken.copy->links;
        taken.copy->idle.push_back(taken.thread);
    }

    std::size_t loaded() const {
        std::lock_guard lock(mutex_);
        return copies_.size();
    }

    const std::size_t allowed_ = copies_from_environment();

private:
    Copies() = default;

    mutable std::mutex mutex_;
    const pid_t owner_ = ::getpid();
    std::size_t own_links_ = 0;                           // guarded by mutex_
    std::size_t loading_ = 0;                             // guarded by mutex_
    bool load_failed_ = false;                            // guarded by mutex_
    std::vector<std::unique_ptr<NvJitLinkCopy>> copies_;  // guarded by mutex_
};

}  // namespace

NvJitLinkLease::NvJitLinkLease(NvJitLinkLease&& other) noexcept
    : api_(other.api_), copy_(other.copy_), thread_(other.thread_), held_(other.held_) {
    other.held_ = false;
}

NvJitLinkLease::~NvJitLinkLease() {
    if (held_) Copies::instance().give_back({copy_, thread_});
}

void NvJitLinkLease::run(FunctionRef<void()> work) const {
    if (thread_ == nullptr) {
        work();
    } else {
        thread_->run(work);
    }
}

Result<NvJitLinkLease> lease_nvjitlink() {
    const auto& own = nvjitlink_api();
    if (!own) return own.error();
    const Copies::Taken taken = Copies::instance().take();
    const NvJitLinkApi* api = taken.copy != nullptr ? taken.copy->api.get() : *own;
    return NvJitLinkLease(api, taken.copy, taken.thread);
}

std::size_t nvjitlink_copies_allowed() {
    return Copies::instance().allowed_;
}

std::size_t nvjitlink_copies_loaded() {
    return Copies::instance().loaded();
}

}  // namespace kcache::driver
