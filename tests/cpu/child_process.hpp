// SPDX-License-Identifier: Apache-2.0
// Running a test's scenario in a fresh process of its own, for races that may crash and for state
// that is set once a process (the epoch domain's barrier).
#pragma once

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

namespace kcache::test {

// Runs `scenario` in a child process: gtest's death-test machinery in "threadsafe" style
// re-executes this binary for this one test, so that a crash in the library under a race fails this
// test instead of killing the whole suite. Assertions inside `scenario` are intercepted in the
// child and written to its stderr, which the parent prints as "Actual msg" when the child does not
// exit with status 0.
template <class Scenario>
void expect_in_child_process(Scenario scenario) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(
        {
            ::testing::TestPartResultArray failures;
            {
                ::testing::ScopedFakeTestPartResultReporter reporter(
                    ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ALL_THREADS, &failures);
                scenario();
            }
            for (int i = 0; i < failures.size(); ++i) {
                const auto& failure = failures.GetTestPartResult(i);
                std::fprintf(stderr, "%s:%d: %s\n",
                             failure.file_name() != nullptr ? failure.file_name() : "?",
                             failure.line_number(), failure.message());
            }
            std::fflush(stderr);
            std::_Exit(failures.size() == 0 ? 0 : 1);
        },
        ::testing::ExitedWithCode(0), "")
        << "the child crashed (Result names the signal) or an assertion failed (listed under "
           "Actual msg)";
}

}  // namespace kcache::test
