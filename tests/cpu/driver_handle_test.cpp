// SPDX-License-Identifier: Apache-2.0
// driver::LibraryId and driver::KernelId: distinct types, so that one cannot be passed where the
// other is asked for, and neither is made from a bare pointer by accident.
#include <gtest/gtest.h>

#include <type_traits>

#include "driver/driver.hpp"

namespace kcache::driver {
namespace {

static_assert(!std::is_same_v<LibraryId, KernelId>);
static_assert(!std::is_convertible_v<KernelId, LibraryId>);
static_assert(!std::is_convertible_v<LibraryId, KernelId>);
static_assert(!std::is_constructible_v<LibraryId, KernelId>);
static_assert(!std::is_constructible_v<KernelId, LibraryId>);
static_assert(!std::is_convertible_v<void*, LibraryId>);  // only explicitly, by the driver
static_assert(!std::is_convertible_v<void*, KernelId>);
static_assert(!std::is_convertible_v<LibraryId, void*>);
static_assert(std::is_trivially_copyable_v<LibraryId> && sizeof(LibraryId) == sizeof(void*));
// Driver::get_kernel takes a library and gives a kernel, never the other way round.
static_assert(
    std::is_invocable_v<decltype(&Driver::get_kernel), Driver&, LibraryId, const std::string&>);
static_assert(
    !std::is_invocable_v<decltype(&Driver::get_kernel), Driver&, KernelId, const std::string&>);
static_assert(!std::is_invocable_v<decltype(&Driver::launch), Driver&, LibraryId,
                                   const LaunchConfig&, void**>);

TEST(DriverHandle, EmptyNamesNothing) {
    EXPECT_FALSE(LibraryId{});
    EXPECT_FALSE(KernelId{});
    EXPECT_EQ(LibraryId{}, LibraryId{nullptr});
}

TEST(DriverHandle, GivesBackTheDriversObject) {
    int object = 7;
    const LibraryId id{&object};
    EXPECT_TRUE(id);
    EXPECT_EQ(id.as<int>(), &object);
    EXPECT_EQ(id, LibraryId{&object});
    EXPECT_NE(id, LibraryId{});
}

}  // namespace
}  // namespace kcache::driver
