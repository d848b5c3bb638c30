// SPDX-License-Identifier: Apache-2.0
// The caller's key, added once to an error where it leaves the public API ("key 'softmax:32':
// ..."); the layers below say what failed, never whose key it was.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "kcache/result.hpp"

namespace kcache::cache {

inline Error with_key(std::string_view key, const Error& error) {
    std::string message = "key '";
    message.append(key).append("': ").append(error.message());
    return Error(error.code(), std::move(message), error.log());
}

template <class T>
Result<T> with_key(std::string_view key, Result<T> result) {
    if (result) return result;
    return with_key(key, result.error());
}

}  // namespace kcache::cache
