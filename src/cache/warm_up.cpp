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
#include <limits>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>
#include <unordered_set>

#include "cache/key_context.hpp"
#include "cache/loaded_modules.hpp"
#include "cache/warm_up_bundles.hpp"
#include "compile/compiler.hpp"
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
    std::optional<Source> to_compile;  // between the first look and the compile, on workers
};

// The items no tier had, compiled largest source first: the largest compile is a warm-up's
// critical path, and started last it would end last (docs/performance.md).
class CompileQueue {
public:
    void push(std::size_t index, std::size_t source_bytes) {
        std::lock_guard lock(mutex_);
        pending_.push_back({source_bytes, index});
        std::push_heap(pending_.begin(), pending_.end());
    }
    std::size_t size() {
        std::lock_guard lock(mutex_);
        return pending_.size();
    }
    std::optional<std::size_t> pop_largest() {
        std::lock_guard lock(mutex_);
        if (pending_.empty()) return std::nullopt;
        std::pop_heap(pending_.begin(), pending_.end());
        const std::size_t index = pending_.back().second;
        pending_.pop_back();
        return index;
    }

private:
    std::mutex mutex_;
    std::vector<std::pair<std::size_t, std::size_t>> pending_;  // guarded by mutex_: a heap
};

std::size_t bytes_of(const Source& source) {
    std::size_t bytes = source.bytes.size();
    for (const auto& header : source.headers) bytes += header.second.size();
    return bytes;
}

// Indices of items whose slot is filled, in the order they were finished. Tier hits wait for
// room: the calling thread loads slower than workers read, and unbounded they would read a large
// warm-up's every entry into memory before most were loaded.
class ReadyQueue {
public:
    explicit ReadyQueue(std::size_t room) : room_(room) {}

    // A compile's result, or anything while nobody else empties the queue: never waits.
    void push(std::size_t index) {
        {
            std::lock_guard lock(mutex_);
            ready_.push_back(index);
        }
        changed_.notify_one();
    }
    // False, pushing nothing, while `room` items wait already.
    bool try_push(std::size_t index) {
        {
            std::lock_guard lock(mutex_);
            if (ready_.size() >= room_) return false;
            ready_.push_back(index);
        }
        changed_.notify_one();
        return true;
    }
    // Until the loads took half the room back, or `patience` passed: a worker woken for every
    // item taken would cost a wake-up a load.
    void wait_for_room(std::chrono::microseconds patience) {
        std::unique_lock lock(mutex_);
        freed_.wait_for(lock, patience, [&] { return ready_.size() <= room_ / 2; });
    }
    // From now on try_push() never refuses (the calling thread makes the items itself, or stops
    // loading), and no worker waits for room.
    void unbound() {
        {
            std::lock_guard lock(mutex_);
            room_ = std::numeric_limits<std::size_t>::max();
        }
        freed_.notify_all();
    }
    // The next ready index, or nullopt if none came within `patience`.
    std::optional<std::size_t> pop_within(std::chrono::microseconds patience) {
        std::size_t index = 0;
        bool half_free = false;
        {
            std::unique_lock lock(mutex_);
            if (!changed_.wait_for(lock, patience, [&] { return !ready_.empty(); })) {
                return std::nullopt;
            }
            index = ready_.front();
            ready_.pop_front();
            half_free = ready_.size() == room_ / 2;
        }
        if (half_free) freed_.notify_all();
        return index;
    }

private:
    std::mutex mutex_;
    std::condition_variable changed_;  // an item came
    std::condition_variable freed_;    // an item was taken
    std::deque<std::size_t> ready_;
    std::size_t room_;  // guarded by mutex_
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
    std::mutex progress_mutex;  // serialises the caller's callback and `done`
    std::size_t done = 0;
    auto finished = [&](std::string_view key, const Error* error) {
        if (!progress) return;
        std::lock_guard lock(progress_mutex);
        ++done;
        report(progress, {done, items.size(), key, error});
    };

    // The bundles a tier has load first, each as one module for its members; the rest of the
    // warm-up takes the sources generated to name them, without generating them again.
    std::optional<cache::WarmUpBundles> bundles;
    // Only where PTX is compiled on the host (what a bundle links), and a tier could hold them.
    if (modules_->options.bundle_warm_ups && firsts.size() > 1 && modules_->options.host_compile &&
        compile::ptx_compiler_identity().ok() &&
        (modules_->tiers().disk() != nullptr || modules_->tiers().remote() != nullptr)) {
        bundles.emplace(*modules_, items, firsts, *arch, threads, kPatience);
        std::vector<std::optional<ModuleHandle>> loaded = bundles->load();
        std::vector<std::size_t> rest;
        for (const std::size_t i : firsts) {
            if (!loaded[i]) {
                rest.push_back(i);
                continue;
            }
            auto kernel = loaded[i]->kernel(items[i].kernel_name);
            if (!kernel && (kernel.error().code() == Errc::kCompileFailed ||
                            kernel.error().code() == Errc::kArtifactGone)) {
                // Code that cannot serve: dropped, and the key made the way of every other item.
                modules_->discard(*loaded[i]);
                rest.push_back(i);
                continue;
            }
            results[i] = std::move(kernel);  // a kernel, or why not (a name not in its source)
            finished(items[i].key, results[i] ? nullptr : &results[i].error());
        }
        firsts = std::move(rest);
    }
    // Item i's source: what its generator gave for the bundles if it ran there, else its
    // generator's.
    auto generate = [&](std::size_t i) -> Result<Source> {
        if (bundles) {
            if (std::optional<Result<Source>> kept = bundles->take_source(i)) {
                return std::move(*kept);
            }
        }
        return items[i].make_source();
    };

    std::vector<Slot> slots(items.size());
    ReadyQueue ready(kWarmUpReadAhead);
    std::atomic<std::size_t> next{0};  // into `firsts`
    // Loads item `i` on the calling thread, from what a worker made if it made anything.
    auto load = [&](std::size_t i, std::optional<cache::PreparedArtifact>* prepared) {
        const WarmUpItem& item = items[i];
        auto made = [&]() -> Result<Source> { return generate(i); };
        results[i] = kernel_impl(item.key, made, item.kernel_name, prepared);
    };
    // Two passes on the workers: every item is first looked for in the tiers, and goes to be
    // loaded if found; what no tier has is compiled once no item is left to look at, or while a
    // worker's hit waits for room, largest first. A tier hit never waits behind a compile.
    CompileQueue compiles;
    // Compiles item `i` (its source generated by its first look) and hands it to the loading.
    auto compile = [&](std::size_t i) {
        const WarmUpItem& item = items[i];
        Slot& slot = slots[i];
        // The source generated for the first look; the caller's generator ran once.
        auto made = [&]() -> Result<Source> { return std::move(*slot.to_compile); };
        auto prepared = modules_->prepare(item.key, made, *arch, /*for_load=*/true);
        slot.to_compile.reset();
        if (prepared) {
            slot.prepared = std::move(prepared).value();
        } else {
            slot.error = cache::with_key(item.key, prepared.error());
        }
        finished(item.key, slot.error ? &*slot.error : nullptr);
        ready.push(i);
    };
    auto make_all = [&] {
        for (std::size_t n = next.fetch_add(1); n < firsts.size(); n = next.fetch_add(1)) {
            const std::size_t i = firsts[n];
            const WarmUpItem& item = items[i];
            Slot& slot = slots[i];
            if (!modules_->contains(item.key, *arch)) {
                auto made = [&]() -> Result<Source> { return generate(i); };
                auto look = modules_->look_in_tiers(item.key, made, *arch);
                if (!look) {
                    slot.error = cache::with_key(item.key, look.error());
                } else if (look->to_compile) {
                    // The source first: another worker may take the compile as soon as it is
                    // queued.
                    const std::size_t bytes = bytes_of(*look->to_compile);
                    slot.to_compile = std::move(look->to_compile);
                    compiles.push(i, bytes);
                    continue;
                } else {
                    slot.prepared = std::move(look->prepared);
                }
            }
            finished(item.key, slot.error ? &*slot.error : nullptr);
            // No room: the loads are behind. A compile waiting starts now rather than after the
            // last look, this hit handed over first (one past the room), not held behind it.
            while (!ready.try_push(i)) {
                if (const std::optional<std::size_t> waiting = compiles.pop_largest()) {
                    ready.push(i);
                    compile(*waiting);
                    break;
                }
                ready.wait_for_room(kPatience);
            }
        }
        while (const std::optional<std::size_t> popped = compiles.pop_largest()) compile(*popped);
    };

    // Workers are started by the calling thread, one at first and more whenever it has waited
    // kPatience for an item while items are left: one more while items are still to be looked
    // at (tier hits, quicker to make than to load, keep one or two workers busy: a thread start
    // costs more than a tier hit), and one for each compile waiting, up to `threads`. A thread
    // that cannot start stops the growth; if none can, the calling thread makes everything
    // first.
    const unsigned count = std::max(1u, std::min(threads, static_cast<unsigned>(items.size())));
    std::vector<std::thread> pool;
    pool.reserve(count);
    struct JoinAll {  // also when the loading below throws: no worker outlives what it uses
        std::vector<std::thread>& pool;
        ReadyQueue& ready;
        ~JoinAll() {
            ready.unbound();  // nobody loads any more: no worker may wait for room
            for (auto& thread : pool) thread.join();
        }
    } join_all{pool, ready};
    bool can_grow = true;
    auto grow = [&] {
        // Compiles waiting get a worker each at once: each takes far longer than a thread's start.
        const std::size_t compiling = compiles.size();
        const bool looking = next.load(std::memory_order_relaxed) < firsts.size();
        std::size_t wanted = std::max<std::size_t>(compiling, looking ? 1 : 0);
        while (can_grow && wanted > 0 && pool.size() < count) {
            try {
                pool.emplace_back(make_all);
                --wanted;
            } catch (const std::system_error& e) {
                can_grow = false;
                util::log_line(util::LogLevel::kInfo,
                               std::string("warm_up: a worker thread did not start: ") + e.what());
            }
        }
    };
    // One item (the one a bundle left, say): the caller would only wait for a worker's start.
    if (firsts.size() > 1) grow();
    if (pool.empty()) {  // made here, before any load: nobody would empty a bounded queue
        ready.unbound();
        make_all();
    }

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
    if (bundles) bundles->queue_missing(results);
    return results;
}

}  // namespace kcache
