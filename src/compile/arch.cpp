#include "compile/arch.hpp"

#include <charconv>
#include <string>

#include "util/try.hpp"

namespace kcache::compile {

Result<void> check_target(const Target& target) {
    const std::string range = "sm_" + std::to_string(kMinArch) + " to sm_" +
                              std::to_string(kMaxArch) + ", arch-specific (sm_XXa) from sm_" +
                              std::to_string(kMinArchSpecific);
    if (target.arch < kMinArch || target.arch > kMaxArch) {
        return Error(Errc::kInvalidArgument, "arch " + std::to_string(target.arch) + " (sm_" +
                                                 std::to_string(target.arch) +
                                                 ") is not one kcache compiles for: " + range);
    }
    if (target.arch_specific && target.arch < kMinArchSpecific) {
        return Error(Errc::kInvalidArgument,
                     target.name() + " has no arch-specific target: " + range);
    }
    return ok();
}

Result<Target> parse_target(std::string_view text) {
    const std::string given(text);
    if (text.starts_with("sm_")) text.remove_prefix(3);
    Target target;
    if (text.ends_with('a')) {
        target.arch_specific = true;
        text.remove_suffix(1);
    }
    const char* end = text.data() + text.size();
    const auto [parsed, error] = std::from_chars(text.data(), end, target.arch);
    if (text.empty() || text.size() > 3 || error != std::errc() || parsed != end) {
        return Error(Errc::kInvalidArgument,
                     "bad arch '" + given + "': sm_XX or sm_XXa, e.g. sm_90 or sm_90a");
    }
    TRY(check_target(target));
    return target;
}

}  // namespace kcache::compile
