// SPDX-License-Identifier: Apache-2.0
// The log: KCACHE_LOG builds its line only when its level is on.
#include "util/log.hpp"

#include <gtest/gtest.h>

#include <string>

namespace kcache::util {
namespace {

class LogTest : public ::testing::Test {
protected:
    void TearDown() override { reset_log(); }
};

std::string counted_line(int* built) {
    ++*built;
    return "a line";
}

TEST_F(LogTest, ALineAboveTheLevelIsNeverBuilt) {
    int built = 0;
    set_log_setting("off");
    KCACHE_LOG(kWarn, counted_line(&built));
    KCACHE_LOG(kInfo, counted_line(&built));
    set_log_setting("warn");
    KCACHE_LOG(kInfo, counted_line(&built));
    KCACHE_LOG(kDebug, counted_line(&built));
    EXPECT_EQ(built, 0);
}

TEST_F(LogTest, ALineAtTheLevelIsBuiltOnce) {
    int built = 0;
    set_log_setting("debug");
    testing::internal::CaptureStderr();
    KCACHE_LOG(kDebug, counted_line(&built));
    const std::string written = testing::internal::GetCapturedStderr();
    EXPECT_EQ(built, 1);
    EXPECT_NE(written.find("kcache: a line"), std::string::npos) << written;
}

}  // namespace
}  // namespace kcache::util
