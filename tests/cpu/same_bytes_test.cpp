// SPDX-License-Identifier: Apache-2.0
// The hit path's byte comparison agrees with std::string_view's at every length and for a
// difference at every position.
#include "util/same_bytes.hpp"

#include <gtest/gtest.h>

#include <string>

namespace kcache::util {
namespace {

TEST(SameBytes, AgreesWithStringEqualityForEveryLengthAndEveryDifferingByte) {
    for (std::size_t n = 0; n <= 40; ++n) {
        std::string a(n, 'k');
        for (std::size_t i = 0; i < n; ++i) a[i] = static_cast<char>('a' + i % 26);
        std::string b = a;
        EXPECT_TRUE(same_bytes(a, b)) << n;
        for (std::size_t i = 0; i < n; ++i) {
            b[i] = static_cast<char>(b[i] ^ 0x20);
            EXPECT_FALSE(same_bytes(a, b)) << "length " << n << ", byte " << i;
            b[i] = a[i];
        }
        EXPECT_FALSE(same_bytes(a, a + "x")) << n;
        EXPECT_FALSE(same_bytes(a + "x", a)) << n;
    }
}

}  // namespace
}  // namespace kcache::util
