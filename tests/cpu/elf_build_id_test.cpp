// SPDX-License-Identifier: Apache-2.0
// util::elf_build_id: the exact build of a compiler library, read from its file without loading it.
#include "util/elf_build_id.hpp"

#include <dlfcn.h>
#include <elf.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>

#include "driver/compiler_api.hpp"
#include "test_support.hpp"

namespace kcache::util {
namespace {

std::string self_path() {
    char path[4096];
    const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    return n > 0 ? std::string(path, static_cast<std::size_t>(n)) : std::string();
}

TEST(ElfBuildId, ThisTestBinaryHasOne) {
    // Debian's toolchain links with --build-id (SHA-1: 20 bytes, 40 hex digits).
    auto id = elf_build_id(self_path());
    ASSERT_TRUE(id.has_value());
    EXPECT_EQ(id->size(), 40u);
    EXPECT_EQ(id->find_first_not_of("0123456789abcdef"), std::string::npos);
}

TEST(ElfBuildId, AMissingFileHasNone) {
    EXPECT_FALSE(elf_build_id("/no/such/library.so").has_value());
}

TEST(ElfBuildId, ANonElfFileHasNone) {
    test::TempDir dir;
    const std::string path = dir.path() + "/text.so";
    std::ofstream(path) << "not an ELF file at all, just some text that is long enough";
    EXPECT_FALSE(elf_build_id(path).has_value());
}

TEST(ElfBuildId, ATruncatedElfFileHasNone) {
    std::ifstream in(self_path(), std::ios::binary);
    std::string head(256, '\0');
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    test::TempDir dir;
    const std::string path = dir.path() + "/truncated.so";
    std::ofstream(path, std::ios::binary) << head.substr(0, 100);
    EXPECT_FALSE(elf_build_id(path).has_value());
}

// A minimal 64-bit ELF file: its header, one PT_NOTE program header at `phoff`, and a GNU
// build-ID note at `note_at` holding `id`.
std::string crafted_elf(std::uint64_t phoff, std::uint64_t note_at, const std::string& id) {
    std::string file(std::max<std::uint64_t>(phoff + sizeof(Elf64_Phdr), note_at + 16 + id.size()),
                     '\0');
    Elf64_Ehdr elf{};
    std::memcpy(elf.e_ident, ELFMAG, SELFMAG);
    elf.e_ident[EI_CLASS] = ELFCLASS64;
    elf.e_ident[EI_DATA] = ELFDATA2LSB;
    elf.e_ident[EI_VERSION] = EV_CURRENT;
    elf.e_type = ET_DYN;
    elf.e_phoff = phoff;
    elf.e_phentsize = sizeof(Elf64_Phdr);
    elf.e_phnum = 1;
    std::memcpy(file.data(), &elf, sizeof elf);
    Elf64_Phdr note{};
    note.p_type = PT_NOTE;
    note.p_offset = note_at;
    note.p_filesz = 16 + id.size();
    std::memcpy(file.data() + phoff, &note, sizeof note);
    Elf64_Nhdr header{4, static_cast<Elf64_Word>(id.size()), NT_GNU_BUILD_ID};
    std::memcpy(file.data() + note_at, &header, sizeof header);
    std::memcpy(file.data() + note_at + sizeof header, "GNU", 4);
    std::memcpy(file.data() + note_at + sizeof header + 4, id.data(), id.size());
    return file;
}

TEST(ElfBuildId, FoundWhereverTheProgramHeadersAndNotesLie) {
    // Read from one head of the file when it holds them, and where they are when it does not.
    const std::string id("\x01\x23\x45\x67\x89\xab\xcd\xef", 8);
    test::TempDir dir;
    const struct {
        std::uint64_t phoff, note_at;
    } layouts[] = {{64, 200}, {64, 9000}, {8192, 300}, {8192, 12000}, {4000, 4090}};
    for (const auto& layout : layouts) {
        const std::string path = dir.path() + "/lib.so";
        std::ofstream(path, std::ios::binary | std::ios::trunc)
            << crafted_elf(layout.phoff, layout.note_at, id);
        EXPECT_EQ(elf_build_id(path), std::optional<std::string>("0123456789abcdef"))
            << "program headers at " << layout.phoff << ", notes at " << layout.note_at;
    }
}

// The build ID as binutils' readelf reads it: an implementation independent of ours. Empty if
// readelf is missing or finds none.
std::string readelf_build_id(const std::string& path) {
    const std::string command = "readelf -n '" + path + "' 2>/dev/null";
    FILE* pipe = popen(command.c_str(), "r");
    if (pipe == nullptr) return {};
    std::string out;
    char buffer[512];
    while (fgets(buffer, sizeof buffer, pipe) != nullptr) out += buffer;
    pclose(pipe);
    const std::size_t at = out.find("Build ID: ");
    if (at == std::string::npos) return {};
    const std::size_t begin = at + 10;
    return out.substr(begin, out.find_first_of("\r\n", begin) - begin);
}

// The file this process has mapped under `name` (from /proc/self/maps, which the loader fills
// and kcache does not), or empty.
std::string mapped_file_named(const std::string& name) {
    std::ifstream maps("/proc/self/maps");
    for (std::string line; std::getline(maps, line);) {
        const std::size_t slash = line.find('/');
        if (slash != std::string::npos && line.find(name, slash) != std::string::npos) {
            return line.substr(slash);
        }
    }
    return {};
}

// A copy of nvJitLink the process already has (loaded by someone else, from anywhere, under its
// own file name or another) is the one identified, found among the loaded objects by file name or
// SONAME. A fresh process each: the identity is found once.
TEST(CompilerIdentity, ACopyAlreadyLoadedIsTheOneIdentified) {
    if (const char* preloaded = std::getenv("KCACHE_TEST_PRELOADED_NVJITLINK")) {
        void* handle = dlopen(preloaded, RTLD_NOW | RTLD_LOCAL);
        ASSERT_NE(handle, nullptr) << dlerror();
        const auto& identity = driver::nvjitlink_identity();
        ASSERT_TRUE(identity.ok()) << identity.error().describe();
        EXPECT_EQ(identity->path, preloaded);
        return;
    }
    const auto& identity = driver::nvjitlink_identity();
    if (!identity.ok()) GTEST_SKIP() << identity.error().describe();
    test::TempDir dir;
    for (const char* file_name : {"libnvJitLink.so.13", "libjitlink-bundled.so"}) {
        const std::string elsewhere = dir.path() + "/" + file_name;
        std::filesystem::create_symlink(identity->path, elsewhere);
        EXPECT_EQ(test::run_self("CompilerIdentity.ACopyAlreadyLoadedIsTheOneIdentified",
                                 {"KCACHE_TEST_PRELOADED_NVJITLINK=" + elsewhere}),
                  0)
            << file_name;
    }
}

// KCACHE_NVJITLINK_LIBRARY naming something that is not a readable file is an error that says
// so, not an identity. A fresh process: the identity is found once.
TEST(CompilerIdentity, AnOverrideThatIsNotAFileIsRefused) {
    if (std::getenv("KCACHE_TEST_OVERRIDE_CHILD") != nullptr) {
        const char* named = std::getenv("KCACHE_NVJITLINK_LIBRARY");
        ASSERT_NE(named, nullptr);
        const auto& identity = driver::nvjitlink_identity();
        ASSERT_FALSE(identity.ok()) << named << " was taken for " << identity->path;
        EXPECT_NE(identity.error().message().find("cannot be read"), std::string::npos)
            << identity.error().message();
        return;
    }
    test::TempDir dir;
    for (const std::string& named : {dir.path(), dir.path() + "/missing.so"}) {
        EXPECT_EQ(
            test::run_self("CompilerIdentity.AnOverrideThatIsNotAFileIsRefused",
                           {"KCACHE_TEST_OVERRIDE_CHILD=1", "KCACHE_NVJITLINK_LIBRARY=" + named}),
            0)
            << named;
    }
}

TEST(CompilerIdentity, TheLibraryLoadedIsTheFileTheIdentityNamed) {
    const auto& identity = driver::nvjitlink_identity();
    if (!identity.ok()) GTEST_SKIP() << identity.error().describe();
    EXPECT_FALSE(identity->path.empty());
    ASSERT_TRUE(driver::nvjitlink_api().ok()) << driver::nvjitlink_api().error().describe();
    const std::string mapped = mapped_file_named("libnvJitLink");
    ASSERT_FALSE(mapped.empty()) << "nvJitLink loaded but not in /proc/self/maps";
    std::error_code error;
    EXPECT_TRUE(std::filesystem::equivalent(mapped, identity->path, error))
        << "mapped " << mapped << ", identity named " << identity->path;
}

TEST(CompilerIdentity, BuildIdAgreesWithReadelf) {
    for (const auto* identity : {&driver::nvrtc_identity(), &driver::nvjitlink_identity()}) {
        if (!identity->ok()) continue;
        const std::string expected = readelf_build_id((*identity)->path);
        if (expected.empty()) GTEST_SKIP() << "readelf found no build ID in " << (*identity)->path;
        EXPECT_EQ((*identity)->build, "build-id " + expected) << (*identity)->path;
    }
}

}  // namespace
}  // namespace kcache::util
