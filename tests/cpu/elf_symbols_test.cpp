// SPDX-License-Identifier: Apache-2.0
// util::elf_symbols: the symbol tables of an ELF image in memory, every part checked against the
// bytes given. A real cubin (made here by ptxas when the toolkit has one), hand-made images, and
// truncated or corrupt ones that must be errors, never a read outside the image.
#include "util/elf_symbols.hpp"

#include <elf.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "test_support.hpp"

namespace kcache::util {
namespace {

// A hand-made image: ELF header, .shstrtab-less sections [null, .strtab, .symtab], the string
// and symbol tables, then the section headers last (as linkers put them).
struct Crafted {
    std::string bytes;
    std::uint64_t symtab_header = 0;  // offset of .symtab's section header
    std::uint64_t strtab_header = 0;
    std::uint64_t symbols_at = 0;  // offset of the first (null) symbol
};

Crafted crafted_image(const std::vector<std::pair<std::string, std::uint8_t>>& functions) {
    std::string strings(1, '\0');
    std::vector<Elf64_Sym> symbols(1);  // the null symbol
    for (const auto& [name, other] : functions) {
        Elf64_Sym symbol{};
        symbol.st_name = static_cast<Elf64_Word>(strings.size());
        symbol.st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC);
        symbol.st_other = other;
        symbol.st_shndx = 1;
        symbol.st_size = 128;
        symbols.push_back(symbol);
        strings += name + '\0';
    }
    Crafted out;
    const std::uint64_t strings_at = sizeof(Elf64_Ehdr);
    out.symbols_at = (strings_at + strings.size() + 7) / 8 * 8;
    const std::uint64_t headers_at = out.symbols_at + symbols.size() * sizeof(Elf64_Sym);
    out.bytes.assign(headers_at + 3 * sizeof(Elf64_Shdr), '\0');

    Elf64_Ehdr elf{};
    std::memcpy(elf.e_ident, ELFMAG, SELFMAG);
    elf.e_ident[EI_CLASS] = ELFCLASS64;
    elf.e_ident[EI_DATA] = ELFDATA2LSB;
    elf.e_ident[EI_VERSION] = EV_CURRENT;
    elf.e_type = ET_EXEC;
    elf.e_ehsize = sizeof(Elf64_Ehdr);
    elf.e_shoff = headers_at;
    elf.e_shentsize = sizeof(Elf64_Shdr);
    elf.e_shnum = 3;
    std::memcpy(out.bytes.data(), &elf, sizeof elf);
    std::memcpy(out.bytes.data() + strings_at, strings.data(), strings.size());
    std::memcpy(out.bytes.data() + out.symbols_at, symbols.data(),
                symbols.size() * sizeof(Elf64_Sym));

    Elf64_Shdr strtab{};
    strtab.sh_type = SHT_STRTAB;
    strtab.sh_offset = strings_at;
    strtab.sh_size = strings.size();
    Elf64_Shdr symtab{};
    symtab.sh_type = SHT_SYMTAB;
    symtab.sh_offset = out.symbols_at;
    symtab.sh_size = symbols.size() * sizeof(Elf64_Sym);
    symtab.sh_entsize = sizeof(Elf64_Sym);
    symtab.sh_link = 1;
    out.strtab_header = headers_at + sizeof(Elf64_Shdr);
    out.symtab_header = headers_at + 2 * sizeof(Elf64_Shdr);
    std::memcpy(out.bytes.data() + out.strtab_header, &strtab, sizeof strtab);
    std::memcpy(out.bytes.data() + out.symtab_header, &symtab, sizeof symtab);
    return out;
}

template <class T>
void patch(std::string& bytes, std::uint64_t offset, const T& value) {
    std::memcpy(bytes.data() + offset, &value, sizeof value);
}

std::vector<std::string> names_of(const std::vector<ElfSymbol>& symbols) {
    std::vector<std::string> names;
    for (const auto& symbol : symbols) names.push_back(symbol.name);
    return names;
}

TEST(ElfSymbols, AHandMadeImageGivesItsSymbolsInOrder) {
    const Crafted image = crafted_image({{"softmax", 0x10}, {"helper", 0}});
    auto symbols = elf_symbols(image.bytes);
    ASSERT_TRUE(symbols.ok()) << symbols.error().message();
    ASSERT_EQ(symbols->size(), 2u);
    EXPECT_EQ((*symbols)[0].name, "softmax");
    EXPECT_EQ((*symbols)[0].type, STT_FUNC);
    EXPECT_EQ((*symbols)[0].binding, STB_GLOBAL);
    EXPECT_EQ((*symbols)[0].other, 0x10);
    EXPECT_EQ((*symbols)[0].size, 128u);
    EXPECT_EQ((*symbols)[1].name, "helper");
    EXPECT_EQ((*symbols)[1].other, 0);
}

TEST(ElfSymbols, AnImageWithoutSectionsHasNoSymbols) {
    Crafted image = crafted_image({{"k", 0}});
    patch(image.bytes, offsetof(Elf64_Ehdr, e_shoff), Elf64_Off{0});
    auto symbols = elf_symbols(image.bytes);
    ASSERT_TRUE(symbols.ok()) << symbols.error().message();
    EXPECT_TRUE(symbols->empty());
}

TEST(ElfSymbols, WhatIsNotA64BitLittleEndianElfImageIsAnError) {
    for (const std::string& bytes :
         {std::string(),
          std::string("\x7f"
                      "ELF"),
          std::string(200, 'x'),
          std::string("not an ELF image at all, just text that is long enough to hold a header"
                      " of sixty-four bytes")}) {
        auto symbols = elf_symbols(bytes);
        ASSERT_FALSE(symbols.ok());
        EXPECT_EQ(symbols.error().code(), Errc::kCorruptEntry);
    }
    Crafted image = crafted_image({{"k", 0}});
    image.bytes[EI_CLASS] = ELFCLASS32;
    EXPECT_FALSE(elf_symbols(image.bytes).ok());
    image = crafted_image({{"k", 0}});
    image.bytes[EI_DATA] = ELFDATA2MSB;
    EXPECT_FALSE(elf_symbols(image.bytes).ok());
}

TEST(ElfSymbols, EveryTruncationIsAnErrorNeverACrash) {
    // The section headers are last: no proper prefix holds them.
    const Crafted image = crafted_image({{"first", 0x10}, {"second", 0x10}});
    for (std::size_t size = 0; size < image.bytes.size(); ++size) {
        auto symbols = elf_symbols(std::string_view(image.bytes).substr(0, size));
        EXPECT_FALSE(symbols.ok()) << "a prefix of " << size << " bytes was accepted";
    }
}

TEST(ElfSymbols, OffsetsAndCountsOutsideTheImageAreErrors) {
    const Crafted good = crafted_image({{"kernel", 0x10}});
    ASSERT_TRUE(elf_symbols(good.bytes).ok());
    struct Corruption {
        const char* what;
        std::function<void(Crafted&)> apply;
    };
    const std::uint64_t sym = offsetof(Elf64_Shdr, sh_offset);
    const std::vector<Corruption> corruptions = {
        {"section headers past the end",
         [](Crafted& c) { patch(c.bytes, offsetof(Elf64_Ehdr, e_shoff), Elf64_Off{1} << 62); }},
        {"section headers wrapping around",
         [](Crafted& c) { patch(c.bytes, offsetof(Elf64_Ehdr, e_shoff), ~Elf64_Off{0} - 8); }},
        {"a section header size not Elf64_Shdr's",
         [](Crafted& c) { patch(c.bytes, offsetof(Elf64_Ehdr, e_shentsize), Elf64_Half{40}); }},
        {"too many sections",
         [](Crafted& c) { patch(c.bytes, offsetof(Elf64_Ehdr, e_shnum), Elf64_Half{4000}); }},
        {"an extended section count that would wrap",
         [](Crafted& c) {
             patch(c.bytes, offsetof(Elf64_Ehdr, e_shnum), Elf64_Half{0});
             const std::uint64_t first = c.strtab_header - sizeof(Elf64_Shdr);
             patch(c.bytes, first + offsetof(Elf64_Shdr, sh_size), Elf64_Xword{1} << 58);
         }},
        {"a symbol table past the end",
         [&](Crafted& c) { patch(c.bytes, c.symtab_header + sym, Elf64_Off{1} << 40); }},
        {"a symbol table that wraps",
         [](Crafted& c) {
             patch(c.bytes, c.symtab_header + offsetof(Elf64_Shdr, sh_size), ~Elf64_Xword{0} - 23);
         }},
        {"a symbol size not Elf64_Sym's",
         [](Crafted& c) {
             patch(c.bytes, c.symtab_header + offsetof(Elf64_Shdr, sh_entsize), Elf64_Xword{0});
         }},
        {"a string table index out of range",
         [](Crafted& c) {
             patch(c.bytes, c.symtab_header + offsetof(Elf64_Shdr, sh_link), Elf64_Word{77});
         }},
        {"a string table index naming no string table",
         [](Crafted& c) {
             patch(c.bytes, c.symtab_header + offsetof(Elf64_Shdr, sh_link), Elf64_Word{2});
         }},
        {"a string table past the end",
         [&](Crafted& c) { patch(c.bytes, c.strtab_header + sym, Elf64_Off{1} << 50); }},
        {"a name outside the string table",
         [](Crafted& c) {
             patch(c.bytes, c.symbols_at + sizeof(Elf64_Sym) + offsetof(Elf64_Sym, st_name),
                   Elf64_Word{0xfffffff0});
         }},
        {"a name that is not terminated",
         [](Crafted& c) {
             // The string table ends in the kernel's name; without its NUL it runs off the table.
             Elf64_Shdr strtab;
             std::memcpy(&strtab, c.bytes.data() + c.strtab_header, sizeof strtab);
             patch(c.bytes, c.strtab_header + offsetof(Elf64_Shdr, sh_size), strtab.sh_size - 1);
         }},
    };
    for (const auto& corruption : corruptions) {
        Crafted image = good;
        corruption.apply(image);
        auto symbols = elf_symbols(image.bytes);
        ASSERT_FALSE(symbols.ok()) << corruption.what << " was accepted";
        EXPECT_EQ(symbols.error().code(), Errc::kCorruptEntry) << corruption.what;
        EXPECT_NE(symbols.error().message().find("malformed ELF image"), std::string::npos);
    }
}

TEST(ElfSymbols, ATableNamedTwiceCannotMultiplyWhatIsRead) {
    std::vector<std::pair<std::string, std::uint8_t>> functions;
    for (int i = 0; i < 60; ++i) functions.emplace_back("k" + std::to_string(i), 0x10);
    Crafted image = crafted_image(functions);
    ASSERT_TRUE(elf_symbols(image.bytes).ok());
    // A fourth section header, the symbol table's again (the headers are last: append it).
    image.bytes += image.bytes.substr(image.symtab_header, sizeof(Elf64_Shdr));
    patch(image.bytes, offsetof(Elf64_Ehdr, e_shnum), Elf64_Half{4});
    auto symbols = elf_symbols(image.bytes);
    ASSERT_FALSE(symbols.ok()) << symbols->size() << " symbols from " << image.bytes.size()
                               << " bytes";
    EXPECT_NE(symbols.error().message().find("overlap"), std::string::npos)
        << symbols.error().message();
}

TEST(ElfSymbols, ManySymbolsNamingOneLongNameAreRefused) {
    std::vector<std::pair<std::string, std::uint8_t>> functions{{std::string(2000, 'n'), 0x10}};
    for (int i = 0; i < 50; ++i) functions.emplace_back("k", 0x10);
    Crafted image = crafted_image(functions);
    ASSERT_TRUE(elf_symbols(image.bytes).ok());
    for (int i = 2; i <= 51; ++i) {  // every symbol named by the long name (at offset 1)
        patch(image.bytes, image.symbols_at + i * sizeof(Elf64_Sym) + offsetof(Elf64_Sym, st_name),
              Elf64_Word{1});
    }
    auto symbols = elf_symbols(image.bytes);
    ASSERT_FALSE(symbols.ok());
    EXPECT_NE(symbols.error().message().find("names repeat"), std::string::npos)
        << symbols.error().message();
}

// ptxas from the CUDA toolkit, or empty where the toolkit has none.
std::string find_ptxas() {
    for (const char* candidate : {"/usr/local/cuda/bin/ptxas"}) {
        if (std::filesystem::exists(candidate)) return candidate;
    }
    return std::system("command -v ptxas >/dev/null 2>&1") == 0 ? "ptxas" : "";
}

TEST(ElfSymbols, ARealCubinNamesItsKernelsAsCudaEntries) {
    const std::string ptxas = find_ptxas();
    if (ptxas.empty()) GTEST_SKIP() << "no ptxas to make a cubin with";
    test::TempDir dir;
    test::write_file(dir.path() + "/k.ptx", R"(.version 7.8
.target sm_90
.address_size 64
.func (.reg .b32 r) helper(.reg .b32 a) { mov.b32 r, a; ret; }
.visible .entry first(.param .u64 p) { ret; }
.visible .entry second_kernel(.param .u32 n) { ret; }
)");
    const std::string command =
        ptxas + " -arch=sm_90 '" + dir.path() + "/k.ptx' -o '" + dir.path() + "/k.cubin' 2>&1";
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
    const std::string cubin = test::read_file(dir.path() + "/k.cubin");
    auto symbols = elf_symbols(cubin);
    ASSERT_TRUE(symbols.ok()) << symbols.error().message();
    std::vector<std::string> entries;
    for (const auto& symbol : *symbols) {
        // CUDA marks a kernel's symbol with STO_CUDA_ENTRY (0x10) in st_other.
        if (symbol.type == STT_FUNC && (symbol.other & 0x10) != 0) entries.push_back(symbol.name);
    }
    std::sort(entries.begin(), entries.end());
    EXPECT_EQ(entries, (std::vector<std::string>{"first", "second_kernel"}))
        << ::testing::PrintToString(names_of(*symbols));
    // And no prefix of it crashes the reader.
    for (std::size_t size = 0; size < cubin.size(); size += 7) {
        (void)elf_symbols(std::string_view(cubin).substr(0, size));
    }
}

}  // namespace
}  // namespace kcache::util
