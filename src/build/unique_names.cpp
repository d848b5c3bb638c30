// SPDX-License-Identifier: Apache-2.0
#include "build/unique_names.hpp"

#include "compile/ptx_rename.hpp"
#include "compile/ptx_symbols.hpp"

namespace kcache::build {

std::size_t unique_names_number(const util::Fingerprint& source_hash) {
    constexpr std::uint64_t kBits48 = (std::uint64_t{1} << 48) - 1;
    return static_cast<std::size_t>(source_hash.low & kBits48);
}

std::string unique_names_suffix(std::size_t number) {
    return compile::renamed_symbol("", kUniqueNameMarker, number);
}

std::optional<std::string> with_unique_names(std::string_view ptx, std::size_t number) {
    const auto names = compile::ptx_module_symbols(ptx);
    if (!names) return std::nullopt;
    return compile::rename_ptx_symbols(ptx, *names, kUniqueNameMarker, number);
}

}  // namespace kcache::build
