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
    delete stripes_.load(std::memory_order_acquire);
}

std::atomic<std::int64_t>& LoadedModule::counter(std::uint32_t stripe) noexcept {
    if (stripe == kHomeStripe) return home_refs_;
    // A reference is held on this stripe, so the block that holds it is there.
    return stripes_.load(std::memory_order_acquire)->stripes[stripe].count;
}

std::optional<std::uint32_t> LoadedModule::try_acquire(std::uint32_t stripe) noexcept {
    // Seq_cst, not acquire, even when the block is found: the protocol's argument puts this load
    // in the single total order, before the increment, so that a retirer that found no block
    // also finds this reader after its store of `retired_` (see loaded_module.hpp).
    RefStripes* block = stripes_.load(std::memory_order_seq_cst);
    if (block == nullptr) {
        auto* fresh = new (std::nothrow) RefStripes();
        if (fresh != nullptr) {
            if (stripes_.compare_exchange_strong(block, fresh, std::memory_order_seq_cst)) {
                block = fresh;
            } else {
                delete fresh;  // another reader installed one first: `block` is now that one
            }
        }
    }
    // Without memory for the block, the home counter still counts the reference.
    std::atomic<std::int64_t>& count = block != nullptr ? block->stripes[stripe].count : home_refs_;
    count.fetch_add(1, std::memory_order_seq_cst);
    const std::uint32_t counted = block != nullptr ? stripe : kHomeStripe;
    if (retired_.load(std::memory_order_seq_cst)) {
        release(counted);
        return std::nullopt;
    }
    return counted;
}

void LoadedModule::add_ref(std::uint32_t stripe) noexcept {
    counter(stripe).fetch_add(1, std::memory_order_relaxed);
}

void LoadedModule::release(std::uint32_t stripe) noexcept {
    auto guard = util::EpochDomain::global().pin();
    counter(stripe).fetch_sub(1, std::memory_order_seq_cst);
    if (retired_.load(std::memory_order_seq_cst)) try_unload();
}

void LoadedModule::retire() noexcept {
    auto guard = util::EpochDomain::global().pin();
    retired_.store(true, std::memory_order_seq_cst);
    try_unload();
}

bool LoadedModule::referenced() const noexcept {
    return sum_refs() != 0;
}

std::int64_t LoadedModule::sum_refs() const noexcept {
    std::int64_t total = home_refs_.load(std::memory_order_seq_cst);
    if (const RefStripes* block = stripes_.load(std::memory_order_seq_cst); block != nullptr) {
        for (const auto& stripe : block->stripes) {
            total += stripe.count.load(std::memory_order_seq_cst);
        }
    }
    return total;
}

void LoadedModule::try_unload() noexcept {
    if (sum_refs() != 0) return;
    bool expected = false;
    if (!unloaded_.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) return;
    driver_->unload_module(module_);
    counters_->unloaded.fetch_add(1, std::memory_order_release);
    if (util::log_enabled(util::LogLevel::kDebug)) {
        util::log_line(util::LogLevel::kDebug,
                       "unloaded " + key + " (sm_" + std::to_string(arch) + ")");
    }
    // Readers pinned now may still be looking at this module (to find it retired).
    util::EpochDomain::global().retire([this] { delete this; });
}

const ResolvedKernel* LoadedModule::find_kernel(std::string_view name) const noexcept {
    for (const ResolvedKernel* k = kernels_.load(std::memory_order_acquire); k != nullptr;
         k = k->next) {
        if (k->name == name) return k;
    }
    return nullptr;
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
    auto id = driver_->get_kernel(module_, driver_name);
    if (!id) {
        Error error = std::move(id).error();
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
