// SPDX-License-Identifier: Apache-2.0
// driver::ModuleId and driver::KernelId: distinct types, so that one cannot be passed where the
// other is asked for, and neither is made from a bare pointer by accident.
#include <gtest/gtest.h>

#include <type_traits>

#include "driver/driver.hpp"

namespace kcache::driver {
namespace {

static_assert(!std::is_same_v<ModuleId, KernelId>);
static_assert(!std::is_convertible_v<KernelId, ModuleId>);
static_assert(!std::is_convertible_v<ModuleId, KernelId>);
static_assert(!std::is_constructible_v<ModuleId, KernelId>);
static_assert(!std::is_constructible_v<KernelId, ModuleId>);
static_assert(!std::is_convertible_v<void*, ModuleId>);  // only explicitly, by the driver
static_assert(!std::is_convertible_v<void*, KernelId>);
static_assert(!std::is_convertible_v<ModuleId, void*>);
static_assert(std::is_trivially_copyable_v<ModuleId> && sizeof(ModuleId) == sizeof(void*));
// Driver::get_kernel takes a library and gives a kernel, never the other way round.
static_assert(
    std::is_invocable_v<decltype(&Driver::get_kernel), Driver&, ModuleId, const std::string&>);
static_assert(
    !std::is_invocable_v<decltype(&Driver::get_kernel), Driver&, KernelId, const std::string&>);
static_assert(!std::is_invocable_v<decltype(&Driver::launch), Driver&, ModuleId,
                                   const LaunchConfig&, void**>);

TEST(DriverHandle, EmptyNamesNothing) {
    EXPECT_FALSE(ModuleId{});
    EXPECT_FALSE(KernelId{});
    EXPECT_EQ(ModuleId{}, ModuleId{nullptr});
}

TEST(DriverHandle, GivesBackTheDriversObject) {
    int object = 7;
    const ModuleId id{&object};
    EXPECT_TRUE(id);
    EXPECT_EQ(id.as<int>(), &object);
    EXPECT_EQ(id, ModuleId{&object});
    EXPECT_NE(id, ModuleId{});
}

}  // namespace
}  // namespace kcache::driver
