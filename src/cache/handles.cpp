// SPDX-License-Identifier: Apache-2.0
// ModuleHandle and KernelHandle: reference counting on the module's stripes, and the checked
// launch.
#include <string>

#include "cache/key_context.hpp"
#include "cache/loaded_module.hpp"
#include "kcache/kernel_cache.hpp"
#include "util/try.hpp"

namespace kcache {

ModuleHandle::ModuleHandle(const ModuleHandle& other) noexcept
    : entry_(other.entry_), stripe_(other.stripe_) {
    // Counted on the source's stripe: see LoadedModule's protocol comment.
    if (entry_ != nullptr) entry_->add_ref(stripe_);
}

ModuleHandle& ModuleHandle::operator=(ModuleHandle other) noexcept {
    std::swap(entry_, other.entry_);
    std::swap(stripe_, other.stripe_);
    return *this;
}

void ModuleHandle::release_entry() noexcept {
    entry_->release(stripe_);
}

const std::string& ModuleHandle::key() const noexcept {
    static const std::string empty;
    return entry_ != nullptr ? entry_->key : empty;
}

int ModuleHandle::arch() const noexcept {
    return entry_ != nullptr ? entry_->arch : 0;
}

std::string ModuleHandle::fingerprint() const {
    return entry_ != nullptr && entry_->artifact ? entry_->artifact->hex() : std::string();
}

std::string ModuleHandle::source_digest() const {
    return entry_ != nullptr ? entry_->source_digest.hex() : std::string();
}

Result<KernelHandle> ModuleHandle::kernel(std::string_view name) const {
    if (entry_ == nullptr) return Error(Errc::kInvalidArgument, "empty ModuleHandle");
    auto kernel = entry_->resolve(name);
    if (!kernel) return cache::with_key(entry_->key, kernel.error());
    return KernelHandle(*this, *kernel);
}

Result<DeviceGlobal> ModuleHandle::global(std::string_view name) const {
    if (entry_ == nullptr) return Error(Errc::kInvalidArgument, "empty ModuleHandle");
    auto found = entry_->global(std::string(name));
    if (!found) return cache::with_key(entry_->key, found.error());
    return *found;
}

std::string_view KernelHandle::name() const noexcept {
    return kernel_ != nullptr ? std::string_view(kernel_->name) : std::string_view();
}

int KernelHandle::param_count() const noexcept {
    if (kernel_ == nullptr) return -1;
    try {  // the first call asks the driver under a lock, which may throw; -1 says "unknown"
        auto sizes = kernel_->param_sizes();
        return sizes && *sizes != nullptr ? static_cast<int>((*sizes)->size()) : -1;
    } catch (...) {
        return -1;
    }
}

namespace {

Error count_mismatch(const KernelHandle& handle, std::size_t expected, std::size_t given) {
    return Error(Errc::kArgumentMismatch,
                 "kernel '" + std::string(handle.name()) + "' (key '" + handle.module().key() +
                     "') takes " + std::to_string(expected) + " parameters, launch passed " +
                     std::to_string(given));
}

}  // namespace

Result<void> KernelHandle::launch(const LaunchConfig& config, std::span<void* const> args) const {
    // Once the count is known the check is a load and a compare, with no Result made; anything
    // else (an empty handle, a count not asked yet, a mismatch) goes the checked way.
    const long count =
        kernel_ != nullptr ? kernel_->param_count() : cache::ResolvedKernel::kCountNotAsked;
    if (count != cache::ResolvedKernel::kCountUnknown &&
        static_cast<std::size_t>(count) != args.size()) {
        return launch_checked(config, args);
    }
    // The driver does not write through the argument array; its C signature is just not const.
    // One named result, so that it is made in the caller's place.
    Result<void> launched =
        kernel_->driver->launch(kernel_->id, config, const_cast<void**>(args.data()));
    if (!launched) noticed(launched.error());
    return launched;
}

Result<void> KernelHandle::launch_checked(const LaunchConfig& config,
                                          std::span<void* const> args) const {
    if (kernel_ == nullptr) return Error(Errc::kInvalidArgument, "launch of an empty KernelHandle");
    TRY_ASSIGN(const std::vector<std::size_t>* const known, kernel_->param_sizes());
    if (known != nullptr && args.size() != known->size()) {
        return count_mismatch(*this, known->size(), args.size());
    }
    return checked(kernel_->driver->launch(kernel_->id, config, const_cast<void**>(args.data())));
}

Result<void*> KernelHandle::native_function() const {
    if (kernel_ == nullptr) return Error(Errc::kInvalidArgument, "an empty KernelHandle");
    return checked(kernel_->driver->native_function(kernel_->id));
}

Result<void*> KernelHandle::native_kernel() const {
    if (kernel_ == nullptr) return Error(Errc::kInvalidArgument, "an empty KernelHandle");
    return checked(kernel_->driver->native_kernel(kernel_->id));
}

Result<void> KernelHandle::set_attribute(KernelAttribute attribute, int value) const {
    if (kernel_ == nullptr) return Error(Errc::kInvalidArgument, "an empty KernelHandle");
    return checked(kernel_->driver->set_kernel_attribute(kernel_->id, attribute, value));
}

Result<void> KernelHandle::set_cache_config(CacheConfig config) const {
    if (kernel_ == nullptr) return Error(Errc::kInvalidArgument, "an empty KernelHandle");
    return checked(kernel_->driver->set_cache_config(kernel_->id, config));
}

void KernelHandle::noticed(const Error& error) const {
    // Code that cannot reach this context any more: the next lookup of its key builds it again.
    if (error.code() == Errc::kArtifactGone) module_.entry_->mark_broken(Errc::kArtifactGone);
}

Result<void> KernelHandle::launch_sized(const LaunchConfig& config, void** args,
                                        const std::size_t* sizes, std::size_t count) const {
    if (kernel_ == nullptr) return Error(Errc::kInvalidArgument, "launch of an empty KernelHandle");
    TRY_ASSIGN(const std::vector<std::size_t>* const expected, kernel_->param_sizes());
    if (expected != nullptr) {
        if (count != expected->size()) return count_mismatch(*this, expected->size(), count);
        for (std::size_t i = 0; i < count; ++i) {
            if (sizes[i] != (*expected)[i]) {
                return Error(Errc::kArgumentMismatch,
                             "kernel '" + kernel_->name + "' parameter " + std::to_string(i) +
                                 " is " + std::to_string((*expected)[i]) +
                                 " bytes, launch passed " + std::to_string(sizes[i]) + " bytes");
            }
        }
    }
    return checked(kernel_->driver->launch(kernel_->id, config, args));
}

Result<void> KernelHandle::launch(const LaunchConfig& config, std::span<void* const> args,
                                  std::span<const std::size_t> sizes) const {
    if (args.size() != sizes.size()) {
        return Error(Errc::kInvalidArgument, "launch of kernel '" + std::string(name()) +
                                                 "' with " + std::to_string(args.size()) +
                                                 " arguments and " + std::to_string(sizes.size()) +
                                                 " sizes");
    }
    // The driver does not write through the argument array; its C signature is just not const.
    return launch_sized(config, const_cast<void**>(args.data()), sizes.data(), args.size());
}

}  // namespace kcache
