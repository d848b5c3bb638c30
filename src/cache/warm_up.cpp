// SPDX-License-Identifier: Apache-2.0
// KernelCache::warm_up: make many kernels' artifacts in parallel and load each as soon as it is
// ready. Making one (a tier read, or a compile) needs no context and runs on worker threads;
// loading resolves kernels in the caller's current context, so it stays on the calling thread,
// which loads while the workers are still reading or compiling the rest.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>
#include <unordered_set>

#include "cache/key_context.hpp"
#include "cache/loaded_modules.hpp"
#include "kcache/kernel_cache.hpp"
#include "util/log.hpp"

namespace kcache {
namespace {

// One item's state between its worker and the loading thread.
struct Slot {
    std::optional<cache::PreparedArtifact> prepared;
    std::optional<Error> error;
    // Neither: the key was loaded already, and the calling thread looks it up as kernel() would
    // (verification, its own thread's counters, a kernel name not resolved yet).
};

// Indices of items whose slot is filled, in the order they were finished.
class ReadyQueue {
public:
    void push(std::size_t index) {
        {
            std::lock_guard lock(mutex_);
            ready_.push_back(index);
        }
        changed_.notify_one();
    }
    // The next ready index, or nullopt if none came within `patience`.
    std::optional<std::size_t> pop_within(std::chrono::microseconds patience) {
        std::unique_lock lock(mutex_);
        if (!changed_.wait_for(lock, patience, [&] { return !ready_.empty(); })) {
            return std::nullopt;
        }
        const std::size_t index = ready_.front();
        ready_.pop_front();
        return index;
    }

private:
    std::mutex mutex_;
    std::condition_variable changed_;
    std::deque<std::size_t> ready_;
};

// Runs the caller's progress callback; an exception from it must not end the process, and
// there is no one to hand it to on a worker, so it is logged.
void report(const std::function<void(const WarmUpProgress&)>& progress,
            const WarmUpProgress& step) {
    try {
        progress(step);
    } catch (const std::exception& e) {
        util::log_line(util::LogLevel::kInfo,
                       std::string("warm_up progress callback threw: ") + e.what());
    } catch (...) {
        util::log_line(util::LogLevel::kInfo, "warm_up progress callback threw");
    }
}

// How long the calling thread waits for an item before it starts another worker: longer than a
// tier hit takes to make, far shorter than a compile (docs/performance.md).
constexpr std::chrono::microseconds kPatience{200};

}  // namespace

std::vector<Result<KernelHandle>> KernelCache::warm_up(
    const std::vector<WarmUpItem>& items, unsigned threads,
    const std::function<void(const WarmUpProgress&)>& progress) {
    std::vector<Result<KernelHandle>> results(
        items.size(), Result<KernelHandle>(Error(Errc::kInvalidArgument, "not warmed up")));
    if (items.empty()) return results;
    auto arch = modules_->driver().current_arch();
    if (!arch) {
        for (auto& result : results) result = arch.error();
        return results;
    }

    // A key listed twice is made once: its later items are looked up after all the others.
    std::vector<std::size_t> firsts, repeats;
    {
        std::unordered_set<std::string_view> seen;
        for (std::size_t i = 0; i < items.size(); ++i) {
            (seen.insert(items[i].key).second ? firsts : repeats).push_back(i);
        }
    }
    std::vector<Slot> slots(items.size());
    ReadyQueue ready;
    std::atomic<std::size_t> next{0};  // into `firsts`
    std::mutex progress_mutex;         // serialises the caller's callback and `done`
    std::size_t done = 0;
    auto finished = [&](std::string_view key, const Error* error) {
        if (!progress) return;
        std::lock_guard lock(progress_mutex);
        ++done;
        report(progress, {done, items.size(), key, error});
    };
    // Loads item `i` on the calling thread, from what a worker made if it made anything.
    auto load = [&](std::size_t i, std::optional<cache::PreparedArtifact>* prepared) {
        const WarmUpItem& item = items[i];
        auto made = [&]() -> Result<Source> { return item.make_source(); };
        results[i] = kernel_impl(item.key, made, item.kernel_name, prepared);
    };
    auto make_all = [&] {
        for (std::size_t n = next.fetch_add(1); n < firsts.size(); n = next.fetch_add(1)) {
            const std::size_t i = firsts[n];
            const WarmUpItem& item = items[i];
            Slot& slot = slots[i];
            if (!modules_->contains(item.key, *arch)) {
                auto made = [&]() -> Result<Source> { return item.make_source(); };
                auto prepared = modules_->prepare(item.key, made, *arch, /*for_load=*/true);
                if (prepared) {
                    slot.prepared = std::move(prepared).value();
                } else {
                    slot.error = cache::with_key(item.key, prepared.error());
                }
            }
            finished(item.key, slot.error ? &*slot.error : nullptr);
            ready.push(i);
        }
    };

    // Workers are started by the calling thread, one at first and another whenever it has waited
    // kPatience for an item while items are left: tier hits, quicker to make than to load, keep
    // one or two workers, and compiles soon have all `threads` (a thread start costs more than a
    // tier hit). A thread that cannot start stops the growth; if none can, the calling thread
    // makes everything first.
    const unsigned count = std::max(1u, std::min(threads, static_cast<unsigned>(items.size())));
    std::vector<std::thread> pool;
    pool.reserve(count);
    struct JoinAll {  // also when the loading below throws: no worker outlives what it uses
        std::vector<std::thread>& pool;
        ~JoinAll() {
            for (auto& thread : pool) thread.join();
        }
    } join_all{pool};
    bool can_grow = true;
    auto grow = [&] {
        if (!can_grow || pool.size() == count ||
            next.load(std::memory_order_relaxed) >= firsts.size()) {
            return;
        }
        try {
            pool.emplace_back(make_all);
        } catch (const std::system_error& e) {
            can_grow = false;
            util::log_line(util::LogLevel::kInfo,
                           std::string("warm_up: a worker thread did not start: ") + e.what());
        }
    };
    grow();
    if (pool.empty()) make_all();

    for (std::size_t handled = 0; handled < firsts.size(); ++handled) {
        std::optional<std::size_t> popped;
        while (!(popped = ready.pop_within(kPatience))) grow();
        const std::size_t i = *popped;
        Slot& slot = slots[i];
        if (slot.error) {
            results[i] = std::move(*slot.error);
        } else {
            load(i, &slot.prepared);  // empty if the key was loaded already
        }
    }
    for (const std::size_t i : repeats) {
        load(i, nullptr);
        finished(items[i].key, results[i] ? nullptr : &results[i].error());
    }
    return results;
}

}  // namespace kcache
