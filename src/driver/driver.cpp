// SPDX-License-Identifier: Apache-2.0
// What a driver without native handles, globals or kernel attributes answers.
#include "driver/driver.hpp"

namespace kcache::driver {
namespace {

Error unsupported(const Driver& driver, const char* what) {
    return Error(Errc::kUnsupported, driver.describe() + " cannot " + what);
}

}  // namespace

Result<void*> Driver::native_function(KernelId) {
    return unsupported(*this, "give a kernel's CUfunction");
}

Result<void*> Driver::native_kernel(KernelId) {
    return unsupported(*this, "give a kernel's CUkernel");
}

Result<DeviceGlobal> Driver::module_global(ModuleId, const std::string&) {
    return unsupported(*this, "give a module's globals");
}

Result<void> Driver::set_kernel_attribute(KernelId, KernelAttribute, int) {
    return unsupported(*this, "set kernel attributes");
}

Result<void> Driver::set_cache_config(KernelId, CacheConfig) {
    return unsupported(*this, "set a kernel's cache preference");
}

}  // namespace kcache::driver
