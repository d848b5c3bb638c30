// SPDX-License-Identifier: Apache-2.0
#include "cache/loaded_module.hpp"

#include <algorithm>
#include <new>

#include "util/epoch.hpp"
#include "util/log.hpp"

namespace kcache::cache {

LoadedModule::LoadedModule(std::string key_in, int arch_in, std::uint64_t hash_in,
                           util::Fingerprint source_digest_in,
                           std::optional<util::Fingerprint> artifact_in, driver::ModuleId module,
                           std::shared_ptr<driver::Driver> driver,
                           std::shared_ptr<ModuleCounters> counters, build::LoweredNames names,
                           compile::PtxParamSizes param_sizes)
    : key(std::move(key_in)),
      arch(arch_in),
      hash(hash_in),
      source_digest(source_digest_in),
      artifact(artifact_in),
      module_(module),
      names_(std::move(names)),
      param_sizes_(std::move(param_sizes)),
      driver_(std::move(driver)),
      counters_(std::move(counters)) {
    counters_->loaded.fetch_add(1, std::memory_order_release);
}

LoadedModule::~LoadedModule() {
    const ResolvedKernel* kernel = kernels_.load(std::memory_order_acquire);
    while (kernel != nullptr) {
        const ResolvedKernel* next = kernel->next;
        delete kernel;
        kernel = next;
    }
    if (RefStripes* stripes = block(); stripes != &sealed_block()) delete stripes;
}

void LoadedModule::share(std::shared_ptr<const SharedCode> code, std::string suffix) {
    shared_code_ = std::move(code);
    code_suffix_ = std::move(suffix);
}

void LoadedModule::names_end_in(std::string suffix) {
    code_suffix_ = std::move(suffix);
}

std::string LoadedModule::in_code(std::string_view symbol) const {
    std::string named(symbol);
    named += code_suffix_;
    return named;
}

Result<DeviceGlobal> LoadedModule::global(const std::string& name) const {
    auto found = driver_->module_global(module_, in_code(name));
    if (!found && suffix_may_be_missing() && found.error().code() == Errc::kInvalidArgument) {
        found = driver_->module_global(module_, name);
    }
    if (!found && shared_code_ != nullptr && found.error().code() == Errc::kInvalidArgument) {
        // Named as the caller names it, not as the bundle's code does.
        return Error(Errc::kInvalidArgument,
                     "no __device__ or __constant__ variable named '" + name + "' in the module");
    }
    return found;
}

LoadedModule::RefStripes& LoadedModule::sealed_block() noexcept {
    static RefStripes sealed;  // trivially destructible: usable during static destruction too
    static const bool made_dead = [] {
        for (auto& stripe : sealed.stripes) stripe.count.store(kDead, std::memory_order_relaxed);
        return true;
    }();
    (void)made_dead;
    return sealed;
}

std::uint32_t LoadedModule::try_acquire_slow(std::uint32_t stripe) noexcept {
    RefStripes* block = nullptr;
    auto* fresh = new (std::nothrow) RefStripes();
    if (fresh != nullptr) {
        // Fails if another reader installed a block first, or the retirer sealed the module:
        // `block` is then what they installed.
        if (stripes_.compare_exchange_strong(block, fresh, std::memory_order_acq_rel,
                                             std::memory_order_acquire)) {
            block = fresh;
        } else {
            delete fresh;
        }
    } else {
        block = stripes_.load(std::memory_order_acquire);
    }
    if (block != nullptr) return try_acquire(stripe);
    // Without memory for the block, `home` counts the reference. Seq_cst: either the retirer's
    // final sum of `home` comes after this increment, or this load sees `retired_`.
    home_refs_.fetch_add(1, std::memory_order_seq_cst);
    if (retired_.load(std::memory_order_seq_cst)) {
        release_home();
        return kNotAcquired;
    }
    return kHomeStripe;
}

void LoadedModule::add_ref(std::uint32_t stripe) noexcept {
    // The source's reference keeps the module: relaxed, as for a shared_ptr copy.
    if (stripe != kHomeStripe &&
        !dead(block()->stripes[stripe].count.fetch_add(1, std::memory_order_relaxed))) {
        return;
    }
    home_refs_.fetch_add(1, std::memory_order_relaxed);
}

void LoadedModule::release_home() noexcept {
    if (home_refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) unload();
}

void LoadedModule::retire() noexcept {
    if (retired_.exchange(true, std::memory_order_seq_cst)) return;  // already retired
    // The bias keeps releases that move to `home` during the collapse from reaching zero.
    constexpr std::int64_t kBias = kDead;
    home_refs_.fetch_add(kBias, std::memory_order_seq_cst);
    // Seals a module no hit reached yet: a reader that would install a block finds this one.
    RefStripes* stripes = nullptr;
    std::int64_t moved = 0;
    if (!stripes_.compare_exchange_strong(stripes, &sealed_block(), std::memory_order_acq_rel)) {
        for (auto& stripe : stripes->stripes) {
            moved += stripe.count.exchange(kDead, std::memory_order_acq_rel);
        }
    }
    home_refs_.fetch_add(moved, std::memory_order_relaxed);
    // The bias and the map's reference; acq_rel: the releases that came first happen before an
    // unload here.
    if (home_refs_.fetch_sub(kBias + 1, std::memory_order_acq_rel) == kBias + 1) unload();
}

bool LoadedModule::referenced() const noexcept {
    std::int64_t total = home_refs_.load(std::memory_order_relaxed);
    if (!retired_.load(std::memory_order_relaxed)) --total;  // the map's reference
    if (const RefStripes* stripes = block(); stripes != nullptr) {
        for (const auto& stripe : stripes->stripes) {
            const std::int64_t count = stripe.count.load(std::memory_order_relaxed);
            if (!dead(count)) total += count;
        }
    }
    return total != 0;
}

void LoadedModule::unload() noexcept {
    // A hit that fell back on `home` may take it from zero and back again: unload once.
    bool expected = false;
    if (!unloaded_.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) return;
    if (shared_code_ != nullptr) {
        shared_code_.reset();  // the last member's unloads the code
    } else {
        driver_->unload_module(module_);
    }
    counters_->unloaded.fetch_add(1, std::memory_order_release);
    if (util::log_enabled(util::LogLevel::kDebug)) {
        util::log_line(util::LogLevel::kDebug,
                       "unloaded " + key + " (sm_" + std::to_string(arch) + ")");
    }
    // Readers pinned now may still be looking at this module (to find it retired).
    util::EpochDomain::global().retire([this] { delete this; });
}

void ResolvedKernel::set_param_sizes(std::vector<std::size_t> sizes) {
    param_sizes_ = std::move(sizes);
    params_state_.store(1, std::memory_order_release);
}

Result<const std::vector<std::size_t>*> ResolvedKernel::param_sizes() const {
    switch (params_state_.load(std::memory_order_acquire)) {
        case 1:
            return &param_sizes_;
        case 2:
            return static_cast<const std::vector<std::size_t>*>(nullptr);
        default:
            break;
    }
    std::lock_guard lock(params_mutex_);
    if (const int state = params_state_.load(std::memory_order_acquire); state != 0) {
        return state == 1 ? &param_sizes_ : nullptr;
    }
    auto params = driver->kernel_params(id);
    if (!params) {
        if (params.error().code() != Errc::kUnsupported) return std::move(params).error();
        params_state_.store(2, std::memory_order_release);
        return static_cast<const std::vector<std::size_t>*>(nullptr);
    }
    for (const auto& param : *params) param_sizes_.push_back(param.size);
    params_state_.store(1, std::memory_order_release);
    return &param_sizes_;
}

Result<const ResolvedKernel*> LoadedModule::resolve(std::string_view name) {
    if (const ResolvedKernel* found = find_kernel(name)) return found;
    std::lock_guard lock(resolve_mutex_);
    if (const ResolvedKernel* found = find_kernel(name)) return found;

    auto kernel = std::make_unique<ResolvedKernel>();
    kernel->name = std::string(name);
    kernel->driver = driver_.get();
    // A name expression ("softmax<float, 32>") is asked of the driver by its lowered name.
    std::string driver_name = kernel->name;
    for (const auto& [expression, lowered] : names_) {
        if (expression == name) driver_name = lowered;
    }
    auto id = driver_->get_kernel(module_, in_code(driver_name));
    if (!id && suffix_may_be_missing() && id.error().code() == Errc::kKernelNotFound) {
        id = driver_->get_kernel(module_, driver_name);
    }
    if (!id) {
        Error error = std::move(id).error();
        if (shared_code_ != nullptr && error.code() == Errc::kKernelNotFound) {
            // Named as the caller names it, not as the bundle's code does.
            error = Error(Errc::kKernelNotFound,
                          "no kernel named '" + driver_name + "' in the module", error.log());
        }
        if (error.code() == Errc::kCompileFailed || error.code() == Errc::kArtifactGone) {
            mark_broken(error.code());
        }
        std::string message = error.message();
        if (error.code() == Errc::kKernelNotFound && driver_name == kernel->name &&
            kernel->name.find_first_of("<:(") != std::string::npos) {
            message +=
                " (a template or namespaced CUDA C++ kernel must be listed in the source's "
                "name_expressions, exactly as asked for here)";
        }
        return Error(error.code(), message, error.log());
    }
    kernel->id = *id;
    const auto declared = std::lower_bound(param_sizes_.begin(), param_sizes_.end(), driver_name,
                                           [](const auto& kernel_sizes, const std::string& wanted) {
                                               return kernel_sizes.first < wanted;
                                           });
    if (declared != param_sizes_.end() && declared->first == driver_name) {
        kernel->set_param_sizes(declared->second);
    }
    kernel->next = kernels_.load(std::memory_order_relaxed);
    const ResolvedKernel* published = kernel.release();
    kernels_.store(published, std::memory_order_release);
    return published;
}

}  // namespace kcache::cache
