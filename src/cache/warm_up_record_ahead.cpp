// SPDX-License-Identifier: Apache-2.0
// WarmUpBundles' record (build/warm_up_record.hpp): read before the plan, its bundles loaded
// while the plan runs, and kept again after the loads where the plan differs from it.
#include <algorithm>
#include <exception>
#include <string>
#include <utility>

#include "build/warm_up_record.hpp"
#include "cache/warm_up_bundles.hpp"
#include "cache/warm_up_runners.hpp"
#include "util/log.hpp"

namespace kcache::cache {

std::vector<util::Fingerprint> WarmUpBundles::read_record(std::size_t keys) {
    try {
        std::optional<std::vector<util::Fingerprint>> bundles =
            build::find_warm_up_record(modules_.tiers(), record_);
        if (!bundles) return {};
        // Each bundle holds two members at least: a record naming more is not this warm-up's.
        if (bundles->size() > keys / 2) {
            util::log_line(util::LogLevel::kInfo,
                           "warm_up: its record names more bundles than its keys fill; not used");
            return {};
        }
        return std::move(*bundles);
    } catch (const std::exception& e) {
        util::log_line(util::LogLevel::kInfo,
                       std::string("warm_up: its record did not read: ") + e.what());
        return {};
    }
}

void WarmUpBundles::load_ahead(const std::vector<util::Fingerprint>& bundles) noexcept {
    try {
        Ahead<std::optional<store::Found>> lookups(
            bundles.size(), std::min<std::size_t>(threads_, kLookupThreads), /*caller_helps=*/true,
            [&](std::size_t k) -> std::optional<store::Found> {
                try {
                    std::optional<store::Found> found = modules_.tiers().find(bundles[k]);
                    if (found && build::may_be_bundle(*found)) return found;
                } catch (const std::exception& e) {
                    util::log_line(util::LogLevel::kInfo,
                                   std::string("warm_up: a bundle lookup failed: ") + e.what());
                }
                return std::nullopt;
            });
        for (std::size_t k = 0; k < bundles.size(); ++k) {
            std::optional<store::Found> found = lookups.take(k);
            if (!found || ahead_.contains(bundles[k])) continue;
            auto code = modules_.load_bundle_code(bundles[k], *found);
            if (!code) {  // kept without code: if the plan names it, its members load one by one
                util::log_line(
                    util::LogLevel::kInfo,
                    "bundle " + bundles[k].hex() + " did not load: " + code.error().message());
            }
            ahead_.emplace(bundles[k],
                           LoadedAhead{std::move(*found), code ? std::move(*code) : nullptr});
        }
    } catch (const std::exception& e) {  // what loaded stays; the rest loads after the plan
        util::log_line(util::LogLevel::kInfo,
                       std::string("warm_up: bundles not loaded ahead: ") + e.what());
    }
}

void WarmUpBundles::record(const std::vector<util::Fingerprint>& planned) noexcept {
    try {
        if (planned.empty() || planned == recorded_ || !tiers_shared()) return;
        build::put_warm_up_record(modules_.tiers(), record_, planned);
    } catch (const std::exception& e) {  // the next warm-up plans before it loads, as ever
        util::log_line(util::LogLevel::kInfo,
                       std::string("warm_up: its record not kept: ") + e.what());
    }
}

}  // namespace kcache::cache
