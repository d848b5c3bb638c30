// Result<T> and Error: the value-or-error type every public kcache call returns.
#include "kcache/result.hpp"

#include <gtest/gtest.h>

#include <iterator>
#include <set>
#include <string>
#include <utility>

namespace kcache {
namespace {

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
