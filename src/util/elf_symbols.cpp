// SPDX-License-Identifier: Apache-2.0
#include "util/elf_symbols.hpp"

#include <elf.h>

#include <cstring>
#include <optional>

#include "util/try.hpp"

namespace kcache::util {
namespace {

constexpr std::uint64_t kNameBytesPerImageByte = 16;

Error malformed(const std::string& why) {
    return Error(Errc::kCorruptEntry, "malformed ELF image: " + why);
}

// A view of the image that copies out fixed-size records only where they fit, so that no
// offset or count read from the image can lead outside it (additions checked for overflow).
class Image {
public:
    explicit Image(std::string_view bytes) : bytes_(bytes) {}

    std::uint64_t size() const { return bytes_.size(); }

    bool holds(std::uint64_t offset, std::uint64_t size) const {
        return offset <= bytes_.size() && size <= bytes_.size() - offset;
    }
    template <class T>
    std::optional<T> record(std::uint64_t offset) const {
        if (!holds(offset, sizeof(T))) return std::nullopt;
        T out;
        std::memcpy(&out, bytes_.data() + offset, sizeof out);
        return out;
    }
    std::string_view range(std::uint64_t offset, std::uint64_t size) const {
        return bytes_.substr(static_cast<std::size_t>(offset), static_cast<std::size_t>(size));
    }

private:
    std::string_view bytes_;
};

Result<std::vector<Elf64_Shdr>> section_headers(const Image& image, const Elf64_Ehdr& elf) {
    if (elf.e_shoff == 0) return std::vector<Elf64_Shdr>{};  // no sections: no symbols
    if (elf.e_shentsize != sizeof(Elf64_Shdr)) {
        return malformed("section header size " + std::to_string(elf.e_shentsize));
    }
    std::uint64_t count = elf.e_shnum;
    if (count == 0) {
        // More sections than e_shnum can hold: the count is in section 0's sh_size.
        auto first = image.record<Elf64_Shdr>(elf.e_shoff);
        if (!first) return malformed("section header table outside the image");
        count = first->sh_size;
    }
    // The count alone first, so that count * 64 cannot wrap.
    if (count > image.size() / sizeof(Elf64_Shdr) ||
        !image.holds(elf.e_shoff, count * sizeof(Elf64_Shdr))) {
        return malformed("section header table outside the image");
    }
    std::vector<Elf64_Shdr> sections;
    sections.reserve(static_cast<std::size_t>(count));
    for (std::uint64_t i = 0; i < count; ++i) {
        sections.push_back(*image.record<Elf64_Shdr>(elf.e_shoff + i * sizeof(Elf64_Shdr)));
    }
    return sections;
}

// What all tables together may give. Several section headers may name one table, and many
// symbols one long name: without a bound a small image could ask for memory quadratic in its
// size. Real images are far inside both.
struct Budget {
    std::uint64_t symbols;     // records: no more than the image could hold once
    std::uint64_t name_bytes;  // a multiple of the image, for names that share a tail
};

Result<void> read_table(const Image& image, const std::vector<Elf64_Shdr>& sections,
                        const Elf64_Shdr& table, Budget& budget, std::vector<ElfSymbol>& out) {
    if (table.sh_entsize != sizeof(Elf64_Sym)) {
        return malformed("symbol size " + std::to_string(table.sh_entsize));
    }
    if (table.sh_size % sizeof(Elf64_Sym) != 0 || !image.holds(table.sh_offset, table.sh_size)) {
        return malformed("symbol table outside the image");
    }
    if (table.sh_link >= sections.size() || sections[table.sh_link].sh_type != SHT_STRTAB) {
        return malformed("symbol table without a string table");
    }
    const Elf64_Shdr& strings = sections[table.sh_link];
    if (!image.holds(strings.sh_offset, strings.sh_size)) {
        return malformed("string table outside the image");
    }
    const std::string_view names = image.range(strings.sh_offset, strings.sh_size);
    const std::uint64_t count = table.sh_size / sizeof(Elf64_Sym);
    if (count > budget.symbols) return malformed("symbol tables overlap");
    budget.symbols -= count;
    for (std::uint64_t i = 1; i < count; ++i) {  // symbol 0 is the null symbol
        const auto symbol = *image.record<Elf64_Sym>(table.sh_offset + i * sizeof(Elf64_Sym));
        if (symbol.st_name >= names.size()) {
            return malformed("symbol " + std::to_string(i) + "'s name outside its string table");
        }
        const std::size_t end = names.find('\0', symbol.st_name);
        if (end == std::string_view::npos) {
            return malformed("symbol " + std::to_string(i) + "'s name is not terminated");
        }
        const std::size_t length = end - symbol.st_name;
        if (length > budget.name_bytes) return malformed("symbol names repeat past any real image");
        budget.name_bytes -= length;
        out.push_back({std::string(names.substr(symbol.st_name, length)),
                       static_cast<std::uint8_t>(ELF64_ST_TYPE(symbol.st_info)),
                       static_cast<std::uint8_t>(ELF64_ST_BIND(symbol.st_info)), symbol.st_other,
                       symbol.st_shndx, symbol.st_value, symbol.st_size});
    }
    return ok();
}

}  // namespace

Result<std::vector<ElfSymbol>> elf_symbols(std::string_view bytes) {
    const Image image(bytes);
    const auto elf = image.record<Elf64_Ehdr>(0);
    if (!elf || std::memcmp(elf->e_ident, ELFMAG, SELFMAG) != 0) {
        return malformed("no ELF header");
    }
    if (elf->e_ident[EI_CLASS] != ELFCLASS64 || elf->e_ident[EI_DATA] != ELFDATA2LSB) {
        return malformed("not 64-bit little-endian");
    }
    TRY_ASSIGN(const std::vector<Elf64_Shdr> sections, section_headers(image, *elf));
    std::vector<ElfSymbol> symbols;
    Budget budget{image.size() / sizeof(Elf64_Sym), kNameBytesPerImageByte * image.size()};
    for (const Elf64_Shdr& section : sections) {
        if (section.sh_type == SHT_SYMTAB || section.sh_type == SHT_DYNSYM) {
            TRY(read_table(image, sections, section, budget, symbols));
        }
    }
    return symbols;
}

bool ElfSymbol::defined_for_others() const noexcept {
    return section != SHN_UNDEF && (binding == STB_GLOBAL || binding == STB_WEAK);
}

}  // namespace kcache::util
