// SPDX-License-Identifier: Apache-2.0
// Fuzz target: the key material text of an entry (store::KeyMaterial::parse and
// store::KeyMaterialView::parse), the readable part of what the disk tier stores.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "store/artifact_format.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace kcache::store;
    // A copy sized exactly, so that ASan catches a read one past the text.
    const std::string text(reinterpret_cast<const char*>(data), size);
    auto view = KeyMaterialView::parse(text);
    auto owned = KeyMaterial::parse(text);
    KCACHE_FUZZ_CHECK(view.ok() == owned.ok());
    if (!view) {
        KCACHE_FUZZ_CHECK(view.error().code() == kcache::Errc::kCorruptEntry);
        return 0;
    }
    KCACHE_FUZZ_CHECK(view->owned() == *owned);
    // Every byte of accepted key material is a field or a kernel line: it serializes back exactly.
    KCACHE_FUZZ_CHECK(owned->serialize() == text);
    std::size_t kernel_lines = 0;
    for (std::string_view rest = view->kernel_lines; !rest.empty();) {
        const std::size_t end = rest.find('\n');
        KCACHE_FUZZ_CHECK(end != std::string_view::npos && rest.starts_with("kernel: "));
        rest.remove_prefix(end + 1);
        ++kernel_lines;
    }
    KCACHE_FUZZ_CHECK(view->kernel_names().size() == kernel_lines);
    return 0;
}
