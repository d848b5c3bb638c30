// SPDX-License-Identifier: Apache-2.0
// util::parse_size and format_size: ccache's size units.
#include "util/size.hpp"

#include <gtest/gtest.h>

namespace kcache::util {
namespace {

std::uint64_t size_of(const char* text) {
    auto size = parse_size(text);
    EXPECT_TRUE(size.ok()) << text << ": " << size.error().describe();
    return size.ok() ? *size : 0;
}

TEST(ParseSize, DecimalAndBinaryUnits) {
    EXPECT_EQ(size_of("500k"), 500'000u);
    EXPECT_EQ(size_of("2M"), 2'000'000u);
    EXPECT_EQ(size_of("4G"), 4'000'000'000u);
    EXPECT_EQ(size_of("1T"), 1'000'000'000'000u);
    EXPECT_EQ(size_of("512Ki"), 512u * 1024);
    EXPECT_EQ(size_of("3Mi"), 3u * 1024 * 1024);
    EXPECT_EQ(size_of("4Gi"), 4ull << 30);
    EXPECT_EQ(size_of("1Ti"), 1ull << 40);
}

TEST(ParseSize, ABareNumberIsGigabytesAsInCcache) {
    EXPECT_EQ(size_of("5"), 5'000'000'000u);
    EXPECT_EQ(size_of("0"), 0u);
}

TEST(ParseSize, FractionsAndByteSuffixes) {
    EXPECT_EQ(size_of("1.5G"), 1'500'000'000u);
    EXPECT_EQ(size_of("2GB"), 2'000'000'000u);
    EXPECT_EQ(size_of("2GiB"), 2ull << 30);
}

TEST(ParseSize, NonsenseIsAnErrorQuotingTheText) {
    for (const char* text : {"", "G", "-1G", "4X", "4 GiG", "1e30", "99999999999T"}) {
        auto size = parse_size(text);
        ASSERT_FALSE(size.ok()) << text;
        EXPECT_EQ(size.error().code(), Errc::kInvalidArgument);
        EXPECT_NE(size.error().message().find(std::string("'") + text + "'"), std::string::npos);
    }
}

// A budget that rounds to zero bytes would mean "no limit": the opposite of what was asked.
TEST(ParseSize, APositiveSizeBelowOneByteIsAnErrorNotNoLimit) {
    for (const char* text : {"0.0000000001", "0.0001k", "0.0004Ki"}) {
        auto size = parse_size(text);
        ASSERT_FALSE(size.ok()) << text;
        EXPECT_EQ(size.error().code(), Errc::kInvalidArgument);
    }
    EXPECT_EQ(size_of("0.5k"), 500u);
    EXPECT_EQ(size_of("0.0"), 0u);  // zero itself still means none
}

TEST(FormatSize, PicksAReadableUnit) {
    EXPECT_EQ(format_size(17), "17 bytes");
    EXPECT_EQ(format_size(1536), "1.5 KiB");
    EXPECT_EQ(format_size(4ull << 30), "4.0 GiB");
}

}  // namespace
}  // namespace kcache::util
