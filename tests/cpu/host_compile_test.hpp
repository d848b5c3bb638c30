// SPDX-License-Identifier: Apache-2.0
// The fixture of tests that compile PTX for real (nvJitLink) and load it into the fake driver,
// with a disk tier in a fresh directory: skipped where nvJitLink is missing.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "driver/compiler_api.hpp"
#include "kcache/kernel_cache.hpp"
#include "test_support.hpp"
#include "testing/fake_driver.hpp"

namespace kcache::test {

class HostCompileTest : public ::testing::Test {
protected:
    void SetUp() override {
        if (!driver::nvjitlink_api().ok()) {
            GTEST_SKIP() << driver::nvjitlink_api().error().describe();
        }
    }

    // The fake driver, and the disk tier in dir_.
    CacheOptions options() const {
        CacheOptions o;
        o.driver = fake_;
        o.disk_directory = dir_;
        return o;
    }

    std::shared_ptr<fakes::FakeDriver> fake_ = std::make_shared<fakes::FakeDriver>();
    TempDir temp_;
    std::string dir_ = temp_.path() + "/cache";
};

}  // namespace kcache::test
