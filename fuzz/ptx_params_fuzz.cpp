// SPDX-License-Identifier: Apache-2.0
// Fuzz target: the PTX parameter scanner (compile::ptx_param_sizes), the symbol scanner that names
// what a bundle member owns (compile::ptx_module_symbols) and the renaming that makes those names
// its own (compile::rename_ptx_symbols), and the param-sizes line of an entry's key material
// (compile::parse_param_sizes_line), which a hit trusts for its launch check.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "compile/ptx_params.hpp"
#include "compile/ptx_rename.hpp"
#include "compile/ptx_symbols.hpp"
#include "fuzz_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace kcache::compile;
    // A copy sized exactly, so that ASan catches a read one past the text.
    const std::string text(reinterpret_cast<const char*>(data), size);

    // As PTX: kernels sorted by name, each once, and the line stored for them reads back as them.
    const PtxParamSizes sizes = ptx_param_sizes(text);
    for (std::size_t i = 0; i < sizes.size(); ++i) {
        KCACHE_FUZZ_CHECK(!sizes[i].first.empty());
        if (i > 0) KCACHE_FUZZ_CHECK(sizes[i - 1].first < sizes[i].first);
    }
    const auto stored = parse_param_sizes_line(param_sizes_line(sizes));
    KCACHE_FUZZ_CHECK(stored.has_value() && *stored == sizes);

    // Its symbols, where they read: sorted, each once, each a name (no space, no bracket).
    if (const auto symbols = ptx_module_symbols(text)) {
        for (std::size_t i = 0; i < symbols->size(); ++i) {
            KCACHE_FUZZ_CHECK(!(*symbols)[i].empty());
            KCACHE_FUZZ_CHECK((*symbols)[i].find_first_of(" \t\r\n[]()=;,{}\"/") ==
                              std::string::npos);
            if (i > 0) KCACHE_FUZZ_CHECK((*symbols)[i - 1] < (*symbols)[i]);
        }
        // Renamed, the module defines the same symbols, each renamed, and nothing else.
        if (const auto renamed = rename_ptx_symbols(text, *symbols, "$kc", 7)) {
            std::vector<std::string> expected;
            for (const auto& symbol : *symbols)
                expected.push_back(renamed_symbol(symbol, "$kc", 7));
            std::sort(expected.begin(), expected.end());
            const auto again = ptx_module_symbols(*renamed);
            KCACHE_FUZZ_CHECK(again.has_value() && *again == expected);
        }
    }

    // As a param-sizes line: what it accepts writes back to a line that reads the same.
    if (const auto parsed = parse_param_sizes_line(text)) {
        const auto again = parse_param_sizes_line(param_sizes_line(*parsed));
        KCACHE_FUZZ_CHECK(again.has_value() && *again == *parsed);
    }
    return 0;
}
