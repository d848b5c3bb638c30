// SPDX-License-Identifier: Apache-2.0
// Fuzz target: the ELF symbol reader (util::elf_symbols), which reads the cubins of cache entries
// to name their kernels for `kcache ls`.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_check.hpp"
#include "util/elf_symbols.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    // A copy sized exactly, so that ASan catches a read one past the image.
    const std::string image(reinterpret_cast<const char*>(data), size);
    auto symbols = kcache::util::elf_symbols(image);
    if (!symbols) {
        KCACHE_FUZZ_CHECK(symbols.error().code() == kcache::Errc::kCorruptEntry);
        return 0;
    }
    // What it gives is bounded by the image: a symbol per 24 bytes, 16 bytes of names per byte,
    // each name from inside it.
    KCACHE_FUZZ_CHECK(symbols->size() <= size / 24);
    std::size_t name_bytes = 0;
    for (const auto& symbol : *symbols) {
        KCACHE_FUZZ_CHECK(symbol.name.size() < size);
        name_bytes += symbol.name.size();
    }
    KCACHE_FUZZ_CHECK(name_bytes <= 16 * size);
    return 0;
}
