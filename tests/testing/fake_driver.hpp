// SPDX-License-Identifier: Apache-2.0
// An in-memory driver for CPU tests: "loads" PTX by parsing its .entry declarations, counts
// loads, unloads and launches, and can be told to fail or to be slow.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "driver/driver.hpp"

// The test doubles, kept out of the library users link. Not `kcache::testing`: inside namespace
// kcache that name would hide GoogleTest's ::testing.
namespace kcache::fakes {

using driver::Image;
using driver::ImageSource;
using driver::KernelId;
using driver::KernelParam;
using driver::ModuleId;

class FakeDriver final : public driver::Driver {
public:
    // Threads with no ScopedContext see a context of this arch; 0 means "no context".
    explicit FakeDriver(int default_arch = 90);
    ~FakeDriver() override;

    // Makes a context of `arch` current on the calling thread for the scope's lifetime.
    class ScopedContext {
    public:
        explicit ScopedContext(int arch);
        ~ScopedContext();
        ScopedContext(const ScopedContext&) = delete;
        ScopedContext& operator=(const ScopedContext&) = delete;

    private:
        int previous_;
    };

    std::string describe() const override { return "fake driver"; }
    Result<int> current_arch() override;
    int uniform_arch() const noexcept override;
    Result<ModuleId> load_module(const Source& source) override;
    // Loads a copy, as load_module does. Without `again` it holds `image.owner` until the
    // unload; with it, it lets the bytes go (as the real driver does in a process of one device)
    // and keeps `again`, which load_again() calls as another context would.
    Result<ModuleId> load_binary(Image image, ImageSource again) override;
    void unload_module(ModuleId library) noexcept override;
    Result<KernelId> get_kernel(ModuleId library, const std::string& name) override;
    Result<std::vector<KernelParam>> kernel_params(KernelId kernel) override;
    // Refuses more than 48 KiB of dynamic shared memory unless the kernel was allowed more, as
    // the real driver does.
    Result<void> launch(KernelId kernel, const LaunchConfig& config, void** args) override;
    // The kernel's own address for both; a PTX source's .global and .const variables at made-up
    // addresses.
    Result<void*> native_function(KernelId kernel) override;
    Result<void*> native_kernel(KernelId kernel) override;
    Result<DeviceGlobal> module_global(ModuleId module, const std::string& name) override;
    // Recorded; more shared memory than an H200 block may have is refused.
    Result<void> set_kernel_attribute(KernelId kernel, KernelAttribute attribute,
                                      int value) override;
    Result<void> set_cache_config(KernelId kernel, CacheConfig config) override;

    // Fault injection. A source containing "FAKE_JIT_ERROR" always fails to load; one containing
    // "FAKE_LAZY_JIT_ERROR" loads, then fails at its first kernel lookup (a deferred JIT).
    void fail_next_loads(int count) { fail_next_loads_.store(count); }
    // The next `count` loads throw std::bad_alloc, as an allocation inside a driver call might.
    void throw_on_next_loads(int count) { throw_next_loads_.store(count); }
    void set_load_delay(std::chrono::milliseconds delay) { load_delay_ms_.store(delay.count()); }
    void set_params_supported(bool supported) { params_supported_.store(supported); }
    void set_params_delay(std::chrono::milliseconds delay) {
        params_delay_ms_.store(delay.count());
    }
    // The next `count` launches fail as one in a context that found the code's bytes gone.
    void lose_images_for_next_launches(int count) { lose_images_.store(count); }
    // The next `count` kernel lookups (get_kernel) fail the same way, as a first lookup of a
    // kernel in another context would.
    void lose_images_for_next_lookups(int count) { lose_images_at_lookup_.store(count); }
    // Makes the fake claim that every device shares `arch` (0: they do not).
    void set_uniform_arch(int arch) { uniform_arch_.store(arch); }
    // Counting current_arch() calls writes a shared counter on the hit path, so it is off
    // unless a test asks.
    void count_arch_queries(bool on) { count_arch_queries_.store(on); }
    int arch_queries() const { return arch_queries_.load(); }

    int loads() const { return loads_.load(); }  // successful loads
    int load_attempts() const { return attempts_.load(); }
    int unloads() const { return unloads_.load(); }
    int live_libraries() const;
    int launches() const { return launches_.load(); }
    int param_queries() const { return param_queries_.load(); }    // kernel_params() calls
    int in_place_loads() const { return in_place_loads_.load(); }  // load_binary() calls
    int kept_images() const;  // live libraries that hold their image's bytes
    std::vector<std::string> kernel_names()
        const;                // the live libraries' kernels, as their code names them
    int kept_owners() const;  // distinct owners of those bytes (shared ones count once)
    // Asks every live library loaded with a way back for its bytes again, as a second context
    // would: the bytes each got back, or why it could not.
    std::vector<Result<std::string>> load_again();
    // Launches of the kernel the caller names `kernel_name`, its code's unique suffix or not.
    int launches_of(const std::string& kernel_name) const;
    // What was set on a kernel (by the id a handle's native_kernel() gives); the last launch.
    std::optional<int> attribute_of(KernelId kernel, KernelAttribute attribute) const;
    std::optional<CacheConfig> cache_config_of(KernelId kernel) const;
    LaunchConfig last_launch() const;
    // Launches or lookups that reached a library after it was unloaded: must stay 0.
    int use_after_unload() const { return use_after_unload_.load(); }

private:
    struct FakeKernel;
    struct FakeLibrary;

    const int default_arch_;
    std::atomic<int> fail_next_loads_{0};
    std::atomic<int> throw_next_loads_{0};
    std::atomic<long long> load_delay_ms_{0};
    std::atomic<bool> params_supported_{true};
    std::atomic<long long> params_delay_ms_{0};
    std::atomic<int> uniform_arch_{0};
    std::atomic<bool> count_arch_queries_{false};
    std::atomic<int> arch_queries_{0};

    std::atomic<int> loads_{0}, attempts_{0}, unloads_{0}, launches_{0}, use_after_unload_{0};
    std::atomic<int> param_queries_{0};
    std::atomic<int> in_place_loads_{0};
    std::atomic<int> lose_images_{0};
    std::atomic<int> lose_images_at_lookup_{0};

    mutable std::mutex mutex_;           // guards the members below
    std::set<const FakeLibrary*> live_;  // libraries loaded and not yet unloaded
    // Every library ever loaded, kept until the driver goes so that a use after unload is
    // counted rather than undefined.
    std::vector<std::unique_ptr<FakeLibrary>> all_;
    std::map<std::string, int> launch_counts_;  // by kernel name
    LaunchConfig last_launch_;
};

}  // namespace kcache::fakes
