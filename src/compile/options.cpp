// SPDX-License-Identifier: Apache-2.0
#include "compile/options.hpp"

#include <array>
#include <optional>
#include <string_view>
#include <utility>

namespace kcache::compile {
namespace {

std::string_view trim(std::string_view text) {
    const std::size_t first = text.find_first_not_of(" \t\r\n");
    if (first == std::string_view::npos) return {};
    const std::size_t last = text.find_last_not_of(" \t\r\n");
    return text.substr(first, last - first + 1);
}

// Options that take a value, as (short form, long form). The canonical spelling is the short form
// glued to its value ("-DN=4"), with "=" for -include, whose name is longer than one letter.
struct Valued {
    std::string_view short_form;
    std::string_view long_form;
};
constexpr std::array<Valued, 4> kValued = {{
    {"-D", "--define-macro"},
    {"-U", "--undefine-macro"},
    {"-I", "--include-path"},
    {"-include", "--pre-include"},
}};

// The value of `option` if it is one of `valued`'s spellings; `next` takes the following option
// for the spelled-apart form ("-D", "N=4"). nullopt if it is another option.
template <class Next>
std::optional<std::string> value_of(std::string_view option, const Valued& valued, Next&& next) {
    if (option == valued.short_form || option == valued.long_form) return next();
    for (std::string_view name : {valued.long_form, valued.short_form}) {
        const bool glued = name.size() == 2;  // "-DN=4"; a long name needs "=" or a space
        if (!option.starts_with(name)) continue;
        const std::string_view rest = option.substr(name.size());
        if (!glued && rest.front() != '=' && rest.front() != ' ') continue;
        return std::string(trim(glued && rest.front() != ' ' ? rest : rest.substr(1)));
    }
    return std::nullopt;
}

constexpr std::array<std::string_view, 6> kArchOptions = {
    "-arch", "--gpu-architecture", "-gencode", "--generate-code", "-code", "--gpu-code"};

// `option` is `name`, alone or with a value ("-arch=sm_90", "-arch sm_90").
bool names(std::string_view option, std::string_view name) {
    return option == name ||
           (option.starts_with(name) && (option[name.size()] == '=' || option[name.size()] == ' '));
}

}  // namespace

Result<std::vector<std::string>> normalize_options(const std::vector<std::string>& options) {
    std::vector<std::string> out;
    out.reserve(options.size());
    for (std::size_t i = 0; i < options.size(); ++i) {
        const std::string_view option = trim(options[i]);
        if (option.empty()) continue;
        for (std::string_view arch : kArchOptions) {
            if (names(option, arch)) {
                return Error(Errc::kInvalidArgument,
                             "option '" + std::string(option) +
                                 "' names the arch: kcache compiles for the device's arch (or the "
                                 "one given to prebuild); set Source::arch_specific for sm_XXa");
            }
        }
        const bool relocatable_apart =
            (option == "-rdc" || option == "--relocatable-device-code") && i + 1 < options.size() &&
            trim(options[i + 1]) == "true";
        if (names(option, "-dlto") || names(option, "--dlink-time-opt") || option == "-dc" ||
            option == "--device-c" || option == "-rdc=true" ||
            option == "--relocatable-device-code=true" || relocatable_apart ||
            names(option, "-fdevice-syntax-only")) {
            return Error(Errc::kInvalidArgument,
                         "option '" + std::string(option) +
                             "' makes relocatable or LTO output, which cannot be loaded on its "
                             "own; kcache needs a complete cubin");
        }
        bool valued = false;
        for (const Valued& form : kValued) {
            bool missing = false;
            auto next = [&]() -> std::string {
                if (i + 1 >= options.size()) {
                    missing = true;
                    return {};
                }
                return std::string(trim(options[++i]));
            };
            auto value = value_of(option, form, next);
            if (missing) {
                return Error(Errc::kInvalidArgument,
                             "option '" + std::string(option) + "' lacks its value");
            }
            if (!value) continue;
            out.push_back(std::string(form.short_form) + (form.short_form.size() > 2 ? "=" : "") +
                          *value);
            valued = true;
            break;
        }
        if (valued) continue;
        // Kept as given: "--x" and "-x" are not always the same option to NVRTC (it accepts
        // --device-debug but not -device-debug), and a missed sharing only costs a compile.
        out.emplace_back(option);
    }
    return out;
}

bool lean_recipe_allows(const std::vector<std::string>& normalized) {
    // The front end's alone. Normalized spellings: -D, -U and -I glued to their values, -include=.
    constexpr std::array<std::string_view, 5> kPrefixes = {"-D", "-U", "-I", "-include=", "-diag"};
    constexpr std::array<std::string_view, 2> kFrontEndValued = {"-std", "-builtin-move-forward"};
    constexpr std::array<std::string_view, 12> kFlags = {"-default-device",
                                                         "-device-as-default-execution-space",
                                                         "-w",
                                                         "-disable-warnings",
                                                         "-restrict",
                                                         "-expt-relaxed-constexpr",
                                                         "-extended-lambda",
                                                         "-expt-extended-lambda",
                                                         "-device-int128",
                                                         "-rdc=false",
                                                         "-relocatable-device-code=false",
                                                         "-builtin-initializer-list"};
    for (const std::string& given : normalized) {
        std::string_view option = given;
        // Long forms: NVRTC takes "--std" and "-std" alike for these.
        if (option.starts_with("--")) option.remove_prefix(1);
        bool known = false;
        for (std::string_view prefix : kPrefixes) known = known || option.starts_with(prefix);
        for (std::string_view name : kFrontEndValued) known = known || names(option, name);
        for (std::string_view flag : kFlags) known = known || option == flag;
        if (!known) return false;
    }
    return true;
}

std::string options_line(const std::vector<std::string>& normalized) {
    std::string line;
    for (const auto& option : normalized) {
        if (!line.empty()) line += ' ';
        // Key material is line-based: an option is never allowed to end it.
        for (char c : option) line += (c == '\n' || c == '\r') ? ' ' : c;
    }
    return line;
}

}  // namespace kcache::compile
