// SPDX-License-Identifier: Apache-2.0
// ReplyReader: replies out of RESP bytes however they are split, and the bound on one reply.
#include "store/remote/redis_reply.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kcache::store::remote {
namespace {

using Type = RedisReply::Type;
using namespace std::string_literals;

// Every reply in `bytes`, fed `step` bytes at a time.
std::vector<RedisReply> read_all(std::string_view bytes, std::size_t step,
                                 std::size_t bound = 1 << 20) {
    ReplyReader reader(bound);
    std::vector<RedisReply> replies;
    for (std::size_t at = 0; at < bytes.size(); at += step) {
        EXPECT_TRUE(reader.feed(bytes.substr(at, step)).ok());
        for (;;) {
            auto next = reader.next();
            EXPECT_TRUE(next.ok());
            if (!next.ok() || !next->has_value()) break;
            replies.push_back(std::move(**next));
        }
    }
    return replies;
}

const std::string kMixed =
    "+OK\r\n"
    "-NOPERM this user has no permissions to run the 'set' command\r\n"
    ":-42\r\n"
    "$-1\r\n"
    "$5\r\na\0b\r\n\r\n"
    "*-1\r\n"
    "*3\r\n:1\r\n*2\r\n$1\r\nx\r\n*1\r\n$0\r\n\r\n+in\r\n"s;

void expect_mixed(const std::vector<RedisReply>& replies) {
    ASSERT_EQ(replies.size(), 7u);
    EXPECT_EQ(replies[0].type, Type::kStatus);
    EXPECT_EQ(replies[0].text, "OK");
    EXPECT_TRUE(replies[1].is_error());
    EXPECT_EQ(replies[1].error_code(), "NOPERM");
    EXPECT_EQ(replies[2].type, Type::kInteger);
    EXPECT_EQ(replies[2].integer, -42);
    EXPECT_TRUE(replies[3].is_nil());
    EXPECT_EQ(replies[4].type, Type::kString);
    EXPECT_EQ(replies[4].text, std::string("a\0b\r\n", 5));
    EXPECT_TRUE(replies[5].is_nil());
    const RedisReply& nested = replies[6];
    ASSERT_EQ(nested.type, Type::kArray);
    ASSERT_EQ(nested.elements.size(), 3u);
    EXPECT_EQ(nested.elements[0].integer, 1);
    ASSERT_EQ(nested.elements[1].elements.size(), 2u);
    EXPECT_EQ(nested.elements[1].elements[0].text, "x");
    ASSERT_EQ(nested.elements[1].elements[1].elements.size(), 1u);
    EXPECT_EQ(nested.elements[1].elements[1].elements[0].type, Type::kString);
    EXPECT_EQ(nested.elements[1].elements[1].elements[0].text, "");
    EXPECT_EQ(nested.elements[2].type, Type::kStatus);
    EXPECT_EQ(nested.elements[2].text, "in");
}

TEST(ReplyReader, RepliesComeOutTheSameHoweverTheBytesAreSplit) {
    const std::string bytes(kMixed.data(), kMixed.size());
    for (std::size_t step :
         {std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{7}, bytes.size()}) {
        SCOPED_TRACE(step);
        expect_mixed(read_all(bytes, step));
    }
}

TEST(ReplyReader, AnIncompleteReplyIsNotAReplyYet) {
    ReplyReader reader(1024);
    ASSERT_TRUE(reader.feed("$10\r\n01234").ok());
    auto next = reader.next();
    ASSERT_TRUE(next.ok());
    EXPECT_FALSE(next->has_value());
    ASSERT_TRUE(reader.feed("56789\r\n").ok());
    next = reader.next();
    ASSERT_TRUE(next.ok() && next->has_value());
    EXPECT_EQ((*next)->text, "0123456789");
    EXPECT_EQ((*next)->error_code(), "");
}

TEST(ReplyReader, BytesThatAreNotRespAreAProtocolErrorAfterTheRepliesBeforeThem) {
    ReplyReader reader(1024);
    ASSERT_TRUE(reader.feed("+OK\r\n?what\r\n").ok());
    auto first = reader.next();
    ASSERT_TRUE(first.ok() && first->has_value());
    EXPECT_EQ((*first)->text, "OK");
    auto second = reader.next();
    ASSERT_FALSE(second.ok());
    EXPECT_EQ(second.error().code(), Errc::kCorruptEntry);
    EXPECT_FALSE(reader.feed("+OK\r\n").ok());  // unusable after it
}

TEST(ReplyReader, AReplyOverTheBoundIsAProtocolError) {
    ReplyReader reader(100);
    // The header announces more than the bound: refused as its bytes arrive past the bound.
    ASSERT_TRUE(reader.feed("$1000\r\n").ok());
    auto fed = reader.feed(std::string(200, 'x'));
    ASSERT_FALSE(fed.ok());
    EXPECT_EQ(fed.error().code(), Errc::kCorruptEntry);
    EXPECT_NE(fed.error().message().find("100"), std::string::npos);
}

TEST(ReplyReader, AHugeArrayHeaderIsRefusedBeforeItsElementsAreAllocated) {
    ReplyReader reader(1 << 20);
    auto fed = reader.feed("*2000000000\r\n");
    ASSERT_FALSE(fed.ok());
    EXPECT_EQ(fed.error().code(), Errc::kCorruptEntry);
}

TEST(ReplyReader, ArraysNestedDeeperThanTheParserTakesAreAProtocolError) {
    std::string bytes;
    for (int depth = 0; depth < 12; ++depth) bytes += "*1\r\n";
    bytes += ":1\r\n";
    ReplyReader reader(1 << 20);
    auto fed = reader.feed(bytes);
    ASSERT_FALSE(fed.ok());
    EXPECT_EQ(fed.error().code(), Errc::kCorruptEntry);
    // Three levels, as kcache's own commands could ever see, are fine.
    EXPECT_EQ(read_all("*1\r\n*1\r\n*1\r\n:1\r\n", 1).size(), 1u);
}

TEST(ReplyReader, ManySmallElementsCountAgainstTheBoundByWhatTheyTake) {
    // Each element is four bytes of RESP but a whole RedisReply in memory.
    std::string bytes = "*1000\r\n";
    for (int i = 0; i < 1000; ++i) bytes += ":1\r\n";
    ReplyReader small(bytes.size() * 2);
    EXPECT_FALSE(small.feed(bytes).ok());
    EXPECT_EQ(read_all(bytes, 5, 1000 * sizeof(RedisReply) * 2).size(), 1u);
}

TEST(ReplyReader, ABoundCoversOneReplyNotAStreamOfThem) {
    std::string bytes;
    for (int i = 0; i < 50; ++i)
        bytes += "$20\r\n" + std::string(20, static_cast<char>('a' + i % 26)) + "\r\n";
    const auto replies = read_all(bytes, bytes.size(), 200);  // all fed at once
    ASSERT_EQ(replies.size(), 50u);
    EXPECT_EQ(replies[49].text, std::string(20, 'x'));
}

TEST(ReplyReader, FormattedCommandsAreRespArraysOfBulkStrings) {
    EXPECT_EQ(format_command({"SET", std::string_view("k\0", 2), ""}),
              "*3\r\n$3\r\nSET\r\n$2\r\nk\0\r\n$0\r\n\r\n"s);
}

}  // namespace
}  // namespace kcache::store::remote
