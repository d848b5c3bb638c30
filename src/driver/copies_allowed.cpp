// SPDX-License-Identifier: Apache-2.0
#include "driver/copies_allowed.hpp"

#include <algorithm>
#include <charconv>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>

#include "util/env.hpp"
#include "util/log.hpp"

namespace kcache::driver {
namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

// glibc sets static TLS aside for the C libraries of 3 link maps beyond the first (its tunable
// glibc.rtld.nns, 4 by default); each copy takes one's share. More copies would spend what it
// keeps for the application's own dlopen of libraries with initial-exec TLS, which would then
// fail to load.
constexpr std::size_t kDefaultCopies = 3;
constexpr std::size_t kMostCopies = 15;

}  // namespace

std::size_t copies_allowed_here() {
    if (kSanitized) return 0;
    if (auto named = util::env_string("KCACHE_NVJITLINK_COPIES")) {
        std::size_t count = 0;
        const std::string_view text = *named;
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), count);
        if (error == std::errc() && end == text.data() + text.size()) {
            return std::min(count, kMostCopies);
        }
        util::warn_once("KCACHE_NVJITLINK_COPIES", "KCACHE_NVJITLINK_COPIES=" + *named +
                                                       " is not a count; no copies of nvJitLink "
                                                       "are loaded");
        return 0;
    }
    const unsigned threads = std::thread::hardware_concurrency();
    return std::min<std::size_t>(threads > 1 ? threads - 1 : 0, kDefaultCopies);
}

}  // namespace kcache::driver
