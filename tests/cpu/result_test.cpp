// SPDX-License-Identifier: Apache-2.0
// Result<T> and Error: the value-or-error type every public kcache call returns.
#include "kcache/result.hpp"

#include <gtest/gtest.h>

#include <iterator>
#include <set>
#include <string>
#include <utility>

#include "util/try.hpp"

namespace kcache {
namespace {

Result<int> parse_digit(char c) {
    if (c < '0' || c > '9') return Error(Errc::kInvalidArgument, std::string("not a digit: ") + c);
    return c - '0';
}

Result<int> add_digits(char a, char b, int* steps) {
    TRY_ASSIGN(int first, parse_digit(a));
    ++*steps;
    TRY_ASSIGN(const int second, parse_digit(b));
    ++*steps;
    return first + second;
}

Result<void> check_digit(char c, int* steps) {
    TRY(parse_digit(c));
    ++*steps;
    return ok();
}

TEST(Try, AssignsTheValuesAndGoesOn) {
    int steps = 0;
    Result<int> sum = add_digits('3', '4', &steps);
    ASSERT_TRUE(sum.ok());
    EXPECT_EQ(*sum, 7);
    EXPECT_EQ(steps, 2);
}

TEST(Try, ReturnsTheFirstErrorAndStopsThere) {
    int steps = 0;
    Result<int> sum = add_digits('x', '4', &steps);
    ASSERT_FALSE(sum.ok());
    EXPECT_EQ(sum.error().message(), "not a digit: x");
    EXPECT_EQ(steps, 0);
    sum = add_digits('1', 'y', &steps);
    ASSERT_FALSE(sum.ok());
    EXPECT_EQ(sum.error().message(), "not a digit: y");
    EXPECT_EQ(steps, 1);
}

TEST(Try, PropagatesIntoAVoidResult) {
    int steps = 0;
    EXPECT_TRUE(check_digit('5', &steps).ok());
    EXPECT_EQ(steps, 1);
    Result<void> failed = check_digit('z', &steps);
    ASSERT_FALSE(failed.ok());
    EXPECT_EQ(failed.error().code(), Errc::kInvalidArgument);
    EXPECT_EQ(steps, 1);
}

TEST(Result, HoldsTheValueItWasBuiltFrom) {
    Result<int> result = 42;
    ASSERT_TRUE(result.ok());
    EXPECT_TRUE(static_cast<bool>(result));
    EXPECT_EQ(*result, 42);
    EXPECT_EQ(result.value(), 42);
}

TEST(Result, ArrowReachesTheValuesMembers) {
    Result<std::string> result = std::string("kernel");
    ASSERT_TRUE(result.ok());
    EXPECT_EQ(result->size(), 6u);
}

TEST(Result, ValueCanBeMovedOut) {
    Result<std::string> result = std::string(100, 'x');
    std::string taken = std::move(result).value();
    EXPECT_EQ(taken, std::string(100, 'x'));
}

TEST(Result, HoldsTheErrorItWasBuiltFrom) {
    Result<int> result = Error(Errc::kCompileFailed, "ptx rejected", "line 3: syntax error");
    ASSERT_FALSE(result.ok());
    EXPECT_FALSE(static_cast<bool>(result));
    EXPECT_EQ(result.error().code(), Errc::kCompileFailed);
    EXPECT_EQ(result.error().message(), "ptx rejected");
    EXPECT_EQ(result.error().log(), "line 3: syntax error");
}

TEST(Result, ErrorCanBeMovedOut) {
    Result<int> result = Error(Errc::kKeyConflict, "key 'k' reused");
    Error error = std::move(result).error();
    EXPECT_EQ(error.code(), Errc::kKeyConflict);
    EXPECT_EQ(error.message(), "key 'k' reused");
}

TEST(ResultVoid, OkIsSuccess) {
    Result<void> result = ok();
    EXPECT_TRUE(result.ok());
    EXPECT_TRUE(static_cast<bool>(result));
}

TEST(ResultVoid, DefaultConstructedIsSuccess) {
    Result<void> result;
    EXPECT_TRUE(result.ok());
}

TEST(ResultVoid, HoldsTheErrorItWasBuiltFrom) {
    Result<void> result = Error(Errc::kNoContext, "no context", "");
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.error().code(), Errc::kNoContext);
    EXPECT_EQ(result.error().message(), "no context");
}

TEST(Error, DescribeStartsWithCodeNameAndMessage) {
    Error error(Errc::kCompileFailed, "JIT failed");
    EXPECT_EQ(error.describe(), "compile-failed: JIT failed");
}

TEST(Error, DescribeAppendsTheLogOnTheNextLine) {
    Error error(Errc::kCompileFailed, "JIT failed", "ptxas error: line 7");
    EXPECT_EQ(error.describe(), "compile-failed: JIT failed\nptxas error: line 7");
}

TEST(Error, DescribeUsesEachCodesOwnName) {
    EXPECT_EQ(Error(Errc::kNoDriver, "m").describe(), "no-driver: m");
    EXPECT_EQ(Error(Errc::kArgumentMismatch, "m").describe(), "argument-mismatch: m");
    EXPECT_EQ(Error(Errc::kKernelNotFound, "m").describe(), "kernel-not-found: m");
}

TEST(Error, EveryCodeHasADistinctKnownName) {
    const Errc all[] = {Errc::kNoDriver,       Errc::kNoContext,       Errc::kCompileFailed,
                        Errc::kSourceFailed,   Errc::kKeyConflict,     Errc::kArgumentMismatch,
                        Errc::kKernelNotFound, Errc::kInvalidArgument, Errc::kDriverError,
                        Errc::kUnsupported,    Errc::kCorruptEntry,    Errc::kIoError};
    std::set<std::string> names;
    for (Errc code : all) {
        std::string name = errc_name(code);
        EXPECT_NE(name, "unknown");
        EXPECT_FALSE(name.empty());
        names.insert(name);
    }
    EXPECT_EQ(names.size(), std::size(all));
}

}  // namespace
}  // namespace kcache
