// SPDX-License-Identifier: Apache-2.0
// The symbol tables of a 64-bit little-endian ELF image held in memory, read with every offset,
// size and index checked against the bytes given: for images that come from untrusted places
// (a file, a cache entry), so that a malformed one is an error, never a read outside it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kcache/result.hpp"

namespace kcache::util {

struct ElfSymbol {
    std::string name;
    std::uint8_t type = 0;      // ELF64_ST_TYPE(st_info): STT_FUNC, STT_OBJECT, ...
    std::uint8_t binding = 0;   // ELF64_ST_BIND(st_info): STB_LOCAL, STB_GLOBAL, ...
    std::uint8_t other = 0;     // st_other: visibility, and what a machine's ABI puts there
    std::uint16_t section = 0;  // st_shndx
    std::uint64_t value = 0;
    std::uint64_t size = 0;

    // Defined here (not SHN_UNDEF) and seen by other code (STB_GLOBAL or STB_WEAK).
    bool defined_for_others() const noexcept;

    bool operator==(const ElfSymbol&) const = default;
};

// Every symbol of every SHT_SYMTAB and SHT_DYNSYM section of `image`, in file order, the null
// symbol at the head of each table left out. kCorruptEntry, saying what is wrong, if `image` is
// not a 64-bit little-endian ELF image or any part of a symbol table lies outside it. What it
// returns is bounded by the image's size: at most one symbol per 24 bytes (tables named by
// several headers count each time) and sixteen bytes of names per byte.
Result<std::vector<ElfSymbol>> elf_symbols(std::string_view image);

}  // namespace kcache::util
