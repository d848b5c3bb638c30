// SPDX-License-Identifier: Apache-2.0
#include "cache/source_guard.hpp"

#include <exception>
#include <string>

namespace kcache::cache {

Result<Source> generate_source(FunctionRef<Result<Source>()> make) {
    auto failed = [&](const std::string& why, const std::string& log) {
        return Error(Errc::kSourceFailed, "source generator failed: " + why, log);
    };
    try {
        auto source = make();
        if (!source) return failed(source.error().message(), source.error().log());
        return source;
    } catch (const std::exception& e) {
        return failed(std::string("threw: ") + e.what(), {});
    } catch (...) {
        return failed("threw a non-standard exception", {});
    }
}

}  // namespace kcache::cache
