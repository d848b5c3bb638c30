// SPDX-License-Identifier: Apache-2.0
#include "compile/cubin_symbols.hpp"

#include <cstdint>
#include <cstring>

namespace kcache::compile {
namespace {

// The ELF64 fields read here, little-endian (ELF's generic ABI; cubins are ELF64 LSB).
constexpr std::size_t kHeaderSize = 64;
constexpr std::size_t kSectionHeaderSize = 64;
constexpr std::size_t kSymbolSize = 24;
constexpr std::uint32_t kSymbolTable = 2;  // SHT_SYMTAB
constexpr unsigned kBindGlobal = 1, kBindWeak = 2;

template <class T>
bool read_at(std::string_view bytes, std::uint64_t offset, T& value) {
    if (offset > bytes.size() || bytes.size() - offset < sizeof(T)) return false;
    std::memcpy(&value, bytes.data() + offset, sizeof(T));  // little-endian hosts only (x86-64)
    return true;
}

struct Section {
    std::uint32_t type = 0, link = 0;
    std::uint64_t offset = 0, size = 0;
};

std::optional<Section> section(std::string_view elf, std::uint64_t table, std::uint16_t count,
                               std::uint32_t index) {
    if (index >= count) return std::nullopt;
    const std::uint64_t at = table + std::uint64_t{index} * kSectionHeaderSize;
    Section s;
    if (!read_at(elf, at + 4, s.type) || !read_at(elf, at + 24, s.offset) ||
        !read_at(elf, at + 32, s.size) || !read_at(elf, at + 40, s.link)) {
        return std::nullopt;
    }
    if (s.offset > elf.size() || elf.size() - s.offset < s.size) return std::nullopt;
    return s;
}

}  // namespace

std::optional<std::vector<std::string>> cubin_defined_symbols(std::string_view elf) {
    // "\x7f" "ELF", 64-bit (2), little-endian (1).
    if (elf.size() < kHeaderSize ||
        elf.substr(0, 4) !=
            "\x7f"
            "ELF" ||
        elf[4] != 2 || elf[5] != 1) {
        return std::nullopt;
    }
    std::uint64_t table = 0;
    std::uint16_t entry_size = 0, count = 0;
    if (!read_at(elf, 40, table) || !read_at(elf, 58, entry_size) || !read_at(elf, 60, count) ||
        entry_size != kSectionHeaderSize) {
        return std::nullopt;
    }
    std::vector<std::string> names;
    for (std::uint32_t i = 0; i < count; ++i) {
        const auto symbols = section(elf, table, count, i);
        if (!symbols) return std::nullopt;
        if (symbols->type != kSymbolTable) continue;
        const auto strings = section(elf, table, count, symbols->link);
        if (!strings) return std::nullopt;
        const std::string_view text = elf.substr(strings->offset, strings->size);
        for (std::uint64_t at = 0; at + kSymbolSize <= symbols->size; at += kSymbolSize) {
            std::uint32_t name = 0;
            std::uint8_t info = 0;
            std::uint16_t defined_in = 0;  // 0: undefined
            const std::uint64_t symbol = symbols->offset + at;
            if (!read_at(elf, symbol, name) || !read_at(elf, symbol + 4, info) ||
                !read_at(elf, symbol + 6, defined_in)) {
                return std::nullopt;
            }
            const unsigned bind = info >> 4;
            if ((bind != kBindGlobal && bind != kBindWeak) || defined_in == 0) continue;
            if (name >= text.size()) return std::nullopt;
            const std::size_t end = text.find('\0', name);
            if (end == std::string_view::npos) return std::nullopt;
            names.emplace_back(text.substr(name, end - name));
        }
    }
    return names;
}

}  // namespace kcache::compile
