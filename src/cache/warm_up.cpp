// KernelCache::warm_up: compile many kernels in parallel, then load them. Compiling needs no
// context and runs on worker threads; loading resolves kernels in the caller's current context,
// so it stays on the calling thread (from the tiers, it is fast).
#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include "cache/cache_core.hpp"
#include "kcache/kernel_cache.hpp"
#include "util/log.hpp"

namespace kcache {

std::vector<Result<KernelHandle>> KernelCache::warm_up(
    const std::vector<WarmUpItem>& items, unsigned threads,
    const std::function<void(const WarmUpProgress&)>& progress) {
    std::vector<Result<KernelHandle>> results(
        items.size(), Result<KernelHandle>(Error(Errc::kInvalidArgument, "not warmed up")));
    auto arch = core_->driver().current_arch();
    if (!arch) {
        for (auto& result : results) result = arch.error();
        return results;
    }

    std::vector<std::optional<Error>> compile_errors(items.size());
    std::atomic<std::size_t> next{0};
    std::mutex progress_mutex;  // serialises the caller's callback and `done`
    std::size_t done = 0;
    auto worker = [&] {
        for (std::size_t i = next.fetch_add(1); i < items.size(); i = next.fetch_add(1)) {
            const WarmUpItem& item = items[i];
            auto built = prebuild(item.key, item.make_source, *arch);
            // kUnsupported: nothing to compile ahead here (no host compiler); the load below
            // hands the source to the driver's JIT instead.
            if (!built && built.error().code() != Errc::kUnsupported) {
                compile_errors[i] = built.error();
            }
            std::lock_guard lock(progress_mutex);
            ++done;
            if (progress) {
                // The caller's callback runs on our worker: an exception from it must not end
                // the process, and there is no one to hand it to, so it is logged.
                try {
                    progress({done, items.size(), item.key,
                              compile_errors[i] ? &*compile_errors[i] : nullptr});
                } catch (const std::exception& e) {
                    util::log_line(util::LogLevel::kInfo,
                                   std::string("warm_up progress callback threw: ") + e.what());
                } catch (...) {
                    util::log_line(util::LogLevel::kInfo, "warm_up progress callback threw");
                }
            }
        }
    };
    const unsigned count = std::max(
        1u, std::min(threads, static_cast<unsigned>(std::max<std::size_t>(1, items.size()))));
    std::vector<std::thread> pool;
    pool.reserve(count);
    for (unsigned t = 0; t < count; ++t) pool.emplace_back(worker);
    for (auto& thread : pool) thread.join();

    for (std::size_t i = 0; i < items.size(); ++i) {
        if (compile_errors[i]) {
            results[i] = *compile_errors[i];
            continue;
        }
        results[i] = kernel(items[i].key, items[i].make_source, items[i].kernel_name);
    }
    return results;
}

}  // namespace kcache
