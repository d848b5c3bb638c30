// SPDX-License-Identifier: Apache-2.0
// Propagation of a failed Result in one line, as ccache's TRY does for its expected:
//
//     TRY(directory.check());                          // Result<void>: return its error
//     TRY_ASSIGN(auto bytes, files.read(name, limit)); // Result<T>: declare the value or return
//
// Statements, not expressions: a statement expression would be a GNU extension.
#pragma once

#include <utility>

#define KCACHE_TRY_CONCAT_(a, b) a##b
#define KCACHE_TRY_NAME_(line) KCACHE_TRY_CONCAT_(kcache_try_result_, line)

#define TRY(expression)                                   \
    do {                                                  \
        auto&& kcache_try_result_ = (expression);         \
        if (!kcache_try_result_) {                        \
            return std::move(kcache_try_result_).error(); \
        }                                                 \
    } while (false)

#define TRY_ASSIGN(declaration, expression)                   \
    auto&& KCACHE_TRY_NAME_(__LINE__) = (expression);         \
    if (!KCACHE_TRY_NAME_(__LINE__)) {                        \
        return std::move(KCACHE_TRY_NAME_(__LINE__)).error(); \
    }                                                         \
    declaration = std::move(KCACHE_TRY_NAME_(__LINE__)).value()
