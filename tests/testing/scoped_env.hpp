// SPDX-License-Identifier: Apache-2.0
// An environment variable set (or unset) for one test, the previous value put back after.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

namespace kcache::test {

class ScopedEnv {
public:
    // `value` null: unset while this lives.
    ScopedEnv(const char* name, const char* value) : name_(name) {
        if (const char* previous = std::getenv(name)) previous_ = previous;
        if (value != nullptr) {
            ::setenv(name, value, 1);
        } else {
            ::unsetenv(name);
        }
    }
    ~ScopedEnv() {
        if (previous_) {
            ::setenv(name_, previous_->c_str(), 1);
        } else {
            ::unsetenv(name_);
        }
    }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;

private:
    const char* name_;
    std::optional<std::string> previous_;
};

}  // namespace kcache::test
